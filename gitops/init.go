package gitops

import (
	"context"
	"fmt"
)

// InitRepository makes dir (which must exist) a new repository on branch
// with one commit of every file in it, authored and committed by who, and
// returns a Client for it. It is for demos and fixtures; o applies as for
// [New], to every git process including `init`.
func InitRepository(ctx context.Context, dir, branch, message string, who Identity, o Options) (*Client, error) {
	r := newRunner(o)
	idEnv := []string{
		"GIT_AUTHOR_NAME=" + who.Name, "GIT_AUTHOR_EMAIL=" + who.Email,
		"GIT_COMMITTER_NAME=" + who.Name, "GIT_COMMITTER_EMAIL=" + who.Email,
	}
	for _, args := range [][]string{
		{"init", "--quiet", "--initial-branch=" + branch},
		{"add", "--all"},
		{"commit", "--quiet", "--no-verify", "-m", message},
	} {
		if _, err := r.run(ctx, dir, idEnv, nil, args...); err != nil {
			return nil, fmt.Errorf("create repository in %s: %w", dir, err)
		}
	}
	return New(dir, o)
}
