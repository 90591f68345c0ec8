package runner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/prodigy-action/prodigy-action/gitops"
	"github.com/prodigy-action/prodigy-action/internal/procsup"
	"github.com/prodigy-action/prodigy-action/runner/step"
)

// Agents as another user (Agents.User, --agent-user, the Action's
// agent-user input): when the engine runs as root, every map step — shell
// and claude — runs as that user, in a worktree the engine hands to that
// user (gitops.HandOut with an owner), with HOME set to a directory of the
// job's made for them. The repository's git directory, the state directory
// and the engine's files stay the engine's: an agent can read the
// repository's objects (its git needs them) but can write none of it, by
// git or by path. Setup, reduce and failure handlers run as the engine.

// agentGitOptions returns o.Git with what the engine's git needs to work
// in worktrees owned by the agents' user: safe.directory (git refuses a
// work tree owned by another user otherwise). The engine only ever runs
// git in its own repository and worktrees.
func agentGitOptions(o *options) gitops.Options {
	g := o.Git
	if strings.TrimSpace(o.AgentUser) != "" {
		g.Config = append(append([]gitops.ConfigEntry(nil), g.Config...), gitops.ConfigEntry{Key: "safe.directory", Value: "*"})
	}
	return g
}

// agentUsers gives each attempt of the job's agents the user it runs as
// and a HOME of theirs; nil when agents run as the engine.
type agentUsers struct {
	users     *procsup.Users
	homes     string // the directory of the agents' HOMEs
	worktrees string // the job's worktree directory, which they must reach
}

// newAgentUsers returns the job's agent users for Agents.User spec, at
// most maxParallel agents at once (nil, nil: agents run as the engine).
func newAgentUsers(spec string, maxParallel int, paths Paths) (*agentUsers, error) {
	u, err := procsup.ParseUsers(spec, maxParallel)
	if err != nil || u == nil {
		return nil, err
	}
	return &agentUsers{users: u, worktrees: paths.WorktreeRoot(), homes: filepath.Join(paths.WorktreeRoot(), agentHomesName)}, nil
}

// agentHomesName is the directory of the agents' HOMEs in the job's
// worktree directory; it is not a worktree.
const agentHomesName = ".agent-homes"

// agentIdentity is who one attempt's agent is: the user it runs as and its
// HOME; nil when agents run as the engine.
type agentIdentity struct {
	owner gitops.Owner
	home  string
}

// take gives an attempt its user (from the pool: while it runs no other
// agent has that uid, when the range allows) and a fresh, empty HOME of
// theirs, so nothing an earlier agent left in a HOME reaches it. The
// returned function gives both back; call it once every process of the
// attempt has ended.
func (a *agentUsers) take(name string) (*agentIdentity, func(), error) {
	if a == nil {
		return nil, func() {}, nil
	}
	c := a.users.Take()
	id := &agentIdentity{owner: gitops.Owner{UID: c.UID, GID: c.GID}, home: filepath.Join(a.homes, name)}
	release := func() {
		_ = os.RemoveAll(id.home)
		a.users.Give(c)
	}
	_ = os.RemoveAll(id.home)
	if err := os.Mkdir(id.home, 0o700); err != nil {
		release()
		return nil, func() {}, fmt.Errorf("make the agent's home %s: %w", id.home, err)
	}
	if err := os.Lchown(id.home, c.UID, c.GID); err != nil {
		release()
		return nil, func() {}, fmt.Errorf("give the agent's home %s to uid %d: %w", id.home, c.UID, err)
	}
	return id, release, nil
}

// prepare makes the directory of the agents' homes and checks, as the
// agents' user, that they can reach the worktrees and read the
// repository's objects (in commonDir): a clear error before any item runs
// rather than every item failing.
func (a *agentUsers) prepare(ctx context.Context, commonDir string) error {
	if a == nil {
		return nil
	}
	o := gitops.Owner{UID: a.users.First, GID: a.users.GID}
	if err := os.MkdirAll(a.homes, 0o711); err != nil {
		return fmt.Errorf("make the agents' homes in %s: %w", a.homes, err)
	}
	objects := filepath.Join(commonDir, "objects")
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", `test -x "$1" || exit 3; test -r "$2" && test -x "$2" || exit 4`, "sh", a.worktrees, objects)
	cmd.SysProcAttr = procsup.SysProcAttr(step.Credential(&o))
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ee) && ee.ExitCode() == 3:
		return fmt.Errorf("agents running as %d cannot reach their worktrees under %s: every directory above it must be searchable by them (chmod o+x), or set PRODIGY_HOME to a directory they can reach (or run agents as the engine: no --agent-user; the Action's agent-user: off)", o.UID, a.worktrees)
	case errors.As(err, &ee) && ee.ExitCode() == 4:
		return fmt.Errorf("agents running as %d cannot read the repository's objects at %s (their git reads them): make it and the directories above it readable and searchable by them (or run agents as the engine: no --agent-user; the Action's agent-user: off)", o.UID, objects)
	}
	return fmt.Errorf("check what agents running as %d can reach: %w", o.UID, err)
}
