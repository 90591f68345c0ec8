package actionapp

import (
	"context"
	"errors"
	"fmt"
	"strings"

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

// errPersistedCredentials is wrapped by the refusal to run agents next to
// credentials stored in the workspace's git configuration.
var errPersistedCredentials = errors.New("the workspace's git configuration holds credentials")

// prepareGit runs before any job, setup step or agent: it refuses to go
// on while the workspace's repository configuration (local and worktree
// files, and the files they include, as actions/checkout v6 does) holds a
// credential agents could read — an http.<url>.extraheader (what
// actions/checkout persists by default), a credential.* entry, or a remote
// url with a password — and, when the push input is set, it reads where
// origin pushes to now, before anything an agent does could change it.
func (r *actionRun) prepareGit(ctx context.Context) error {
	git, err := gitops.New(r.ws, r.gitOptions())
	if err != nil {
		return fmt.Errorf("open the workspace's repository: %w", err)
	}
	found, err := git.AuditConfig(ctx)
	if err != nil {
		return err
	}
	var creds []string
	for _, f := range found {
		if f.Scope != "local" && f.Scope != "worktree" {
			continue
		}
		k := strings.ToLower(f.Key)
		section, _, _ := strings.Cut(k, ".")
		switch {
		case strings.HasSuffix(k, ".extraheader") && f.Value != "",
			section == "credential",
			section == "remote" && strings.HasSuffix(k, "url") && urlHasPassword(f.Value):
			creds = append(creds, f.Key)
		}
	}
	if len(creds) > 0 {
		return fmt.Errorf("%w (%s): agents run in this repository and could read them. Check the repository out with `persist-credentials: false` (actions/checkout), remove them from .git/config, or run the Action where no token is stored; pushing (input push) needs only the github-token input, which the Action passes to git itself",
			errPersistedCredentials, strings.Join(creds, ", "))
	}
	if r.in.Push {
		u, err := git.PushURL(ctx, "origin")
		if err != nil {
			return fmt.Errorf("push is set: %w", err)
		}
		r.pushURL = u
	}
	return nil
}

// urlHasPassword reports whether a remote url carries user:password@.
func urlHasPassword(u string) bool {
	_, rest, ok := strings.Cut(u, "://")
	if !ok {
		return false
	}
	host, _, _ := strings.Cut(rest, "/")
	userinfo, _, ok := strings.Cut(host, "@")
	return ok && strings.Contains(userinfo, ":")
}

// push pushes the results branch to origin when the push input is set:
// the tip the engine verified (runner.Result.ResultsTip), by object id,
// to the url origin had before the job started, from a private repository
// that reads no configuration an agent could have written
// (gitops.Client.PushCommit). A job whose results branch failed its
// integrity check is not pushed.
func (r *actionRun) push(ctx context.Context, res *runner.Result) error {
	if !r.in.Push || res.ResultsBranch == "" {
		return nil
	}
	if r.in.GitHubToken == "" {
		return fmt.Errorf("push needs github-token")
	}
	if res.IntegrityError != "" {
		return fmt.Errorf("not pushed: the results branch failed its integrity check (see the job's error)")
	}
	server := r.ctx.ServerURL
	if server == "" {
		server = "https://github.com"
	}
	ref := "refs/heads/" + res.ResultsBranch
	git, err := gitops.New(r.ws, r.gitOptions())
	if err == nil {
		tip := res.ResultsTip
		if tip == "" {
			tip, err = git.ResolveRef(ctx, ref)
		}
		if err == nil {
			err = git.PushCommit(ctx, "", r.pushURL, tip, ref, gitops.HTTPAuthConfig(server, r.in.GitHubToken))
		}
	}
	if err != nil {
		return fmt.Errorf("%s", r.redact.String(err.Error()))
	}
	r.env.gha.Noticef("pushed %s", res.ResultsBranch)
	return nil
}
