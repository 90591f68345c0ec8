package actionapp

import (
	"context"
	"fmt"

	"github.com/prodigy-action/prodigy-action/gitops"
	"github.com/prodigy-action/prodigy-action/runner"
)

// gitOptions are the options of every git process of this Action run: a
// minimal environment (no tokens), hooks off, and safe.directory for the
// mounted workspace (it belongs to the runner user, the container is root),
// passed through GIT_CONFIG_* of each child, never set in our own
// environment.
func (r *actionRun) gitOptions() gitops.Options {
	return gitops.Options{Env: gitops.SafeEnv(r.env.Environ()), Config: r.gitConfig}
}

// push pushes the results branch to origin when the push input is set.
func (r *actionRun) push(ctx context.Context, res *runner.Result) error {
	if !r.in.Push || res.ResultsBranch == "" {
		return nil
	}
	if r.in.GitHubToken == "" {
		return fmt.Errorf("push needs github-token")
	}
	server := r.ctx.ServerURL
	if server == "" {
		server = "https://github.com"
	}
	ref := "refs/heads/" + res.ResultsBranch
	git, err := gitops.New(r.ws, r.gitOptions())
	if err == nil {
		err = git.Push(ctx, "origin", []string{ref + ":" + ref}, gitops.HTTPAuthConfig(server, r.in.GitHubToken))
	}
	if err != nil {
		return fmt.Errorf("%s", r.redact.String(err.Error()))
	}
	r.env.gha.Noticef("pushed %s", res.ResultsBranch)
	return nil
}
