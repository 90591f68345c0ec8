package gitops

import (
	"context"
	"fmt"
	"strings"
)

// Push runs `git push --quiet <remote> <refspecs…>` from the top level.
// It reads the repository's configuration (remote urls, url rewrites,
// proxies, ssh commands), which agents sharing the repository can write:
// to push with a token use [Client.PushCommit], which reads none.
// config is extra configuration for this command only (for example
// [HTTPAuthConfig]); it travels in the environment of this one git process,
// never on its command line. Hooks are off as for every git process of the
// Client, so a pre-push hook planted in the repository never sees it.
func (c *Client) Push(ctx context.Context, remote string, refspecs []string, config []ConfigEntry) error {
	return c.remote(ctx, "push", remote, refspecs, config)
}

// Fetch runs `git fetch --quiet <remote> <refspecs…>`; config as for
// [Client.Push].
func (c *Client) Fetch(ctx context.Context, remote string, refspecs []string, config []ConfigEntry) error {
	return c.remote(ctx, "fetch", remote, refspecs, config)
}

func (c *Client) remote(ctx context.Context, verb, remote string, refspecs []string, config []ConfigEntry) error {
	if remote == "" || strings.HasPrefix(remote, "-") {
		return fmt.Errorf("%s: invalid remote %q", verb, remote)
	}
	args := append([]string{verb, "--quiet", "--end-of-options", remote}, refspecs...)
	r := c.runner.withCommandConfig(config)
	if _, err := r.run(ctx, c.top, nil, nil, args...); err != nil {
		return fmt.Errorf("%s %s: %w", verb, remote, err)
	}
	return nil
}
