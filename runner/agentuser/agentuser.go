// Package agentuser runs agents as another user (Agents.User,
// --agent-user, the Action's agent-user input): when the engine runs as
// root, every map step — shell and claude — runs as that user, in a
// worktree the engine hands to that user (gitops.HandOut with an owner),
// with HOME set to a directory of the job's made for them. The
// repository's git directory, the state directory and the engine's files
// stay the engine's: an agent can read the repository's objects (its git
// needs them) but can write none of it, by git or by path. Setup, reduce
// and failure handlers run as the engine.
package agentuser

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

// GitOptions returns g with what the engine's git needs to work in
// worktrees owned by the agents' user when spec names one: safe.directory
// (git refuses a work tree owned by another user otherwise). The engine
// only ever runs git in its own repository and worktrees.
func GitOptions(g gitops.Options, spec string) gitops.Options {
	if strings.TrimSpace(spec) != "" {
		g.Config = append(append([]gitops.ConfigEntry(nil), g.Config...), gitops.ConfigEntry{Key: "safe.directory", Value: "*"})
	}
	return g
}

// Users gives each attempt of the job's agents the user it runs as and a
// HOME of theirs; nil when agents run as the engine (its methods then do
// nothing).
type Users struct {
	users     *procsup.Users
	homes     string // the directory of the agents' HOMEs
	worktrees string // the job's worktree directory, which they must reach
}

// New returns the agent users of the job whose worktrees are under
// worktreeRoot for Agents.User spec, at most maxParallel agents at once
// (nil, nil: agents run as the engine).
func New(spec string, maxParallel int, worktreeRoot string) (*Users, error) {
	u, err := procsup.ParseUsers(spec, maxParallel)
	if err != nil || u == nil {
		return nil, err
	}
	return &Users{users: u, worktrees: worktreeRoot, homes: filepath.Join(worktreeRoot, HomesName)}, nil
}

// HomesName is the directory of the agents' HOMEs in the job's
// worktree directory; it is not a worktree.
const HomesName = ".agent-homes"

// Identity is who one attempt's agent is: the user it runs as and its
// HOME; nil when agents run as the engine.
type Identity struct {
	Owner gitops.Owner
	Home  string
}

// Take gives an attempt its user (from the pool: while it runs no other
// agent has that uid, when the range allows) and a fresh, empty HOME of
// theirs, so nothing an earlier agent left in a HOME reaches it. The
// returned function gives both back; call it once every process of the
// attempt has ended.
func (a *Users) Take(name string) (*Identity, func(), error) {
	if a == nil {
		return nil, func() {}, nil
	}
	c := a.users.Take()
	id := &Identity{Owner: gitops.Owner{UID: c.UID, GID: c.GID}, Home: filepath.Join(a.homes, name)}
	release := func() {
		_ = os.RemoveAll(id.Home)
		a.users.Give(c)
	}
	_ = os.RemoveAll(id.Home)
	if err := os.Mkdir(id.Home, 0o700); err != nil {
		release()
		return nil, func() {}, fmt.Errorf("make the agent's home %s: %w", id.Home, err)
	}
	if err := os.Lchown(id.Home, c.UID, c.GID); err != nil {
		release()
		return nil, func() {}, fmt.Errorf("give the agent's home %s to uid %d: %w", id.Home, c.UID, err)
	}
	return id, release, nil
}

// Prepare makes the directory of the agents' homes and checks, as the
// agents' user, that they can reach the worktrees and read the
// repository's objects (in commonDir): a clear error before any item runs
// rather than every item failing.
func (a *Users) Prepare(ctx context.Context, commonDir string) error {
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
