package runner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/prodigy-action/prodigy-action/gitops"
	"github.com/prodigy-action/prodigy-action/internal/procsup"
)

// Agents as another user (Agents.User, --agent-user, the Action's
// agent-user input): when the engine runs as root, every map step — shell
// and claude — runs as that user, in a worktree the engine hands to that
// user (gitops.HandOut with an owner), with HOME set to a directory of the
// job's made for them. The repository's git directory, the state directory
// and the engine's files stay the engine's: an agent can read the
// repository's objects (its git needs them) but can write none of it, by
// git or by path. Setup, reduce and failure handlers run as the engine.

// agentUser is a resolved Agents.User: uids first..first+count-1,
// all with group gid.
type agentUser struct {
	first, count, gid int
}

// parseAgentUser resolves "NAME", "UID", "FIRST-LAST" (a range of uids:
// every agent running at once gets one of its own) with an optional
// ":GID" or ":GROUP" (default: a NAME's primary group, else the first
// uid's number). Root, and the engine's own user, are refused: they would
// be no boundary.
//
// "auto" is AutoAgentUsers when the engine runs as root (one uid per agent
// running at once, from 70000) and nothing otherwise: the Action's default.
func parseAgentUser(s string, maxParallel int) (*agentUser, error) {
	s = strings.TrimSpace(s)
	if s == "auto" {
		if os.Geteuid() != 0 {
			return nil, nil
		}
		s = fmt.Sprintf("%d-%d", autoAgentUID, autoAgentUID+max(1, maxParallel)-1)
	}
	if s == "" {
		return nil, nil
	}
	users, group, hasGroup := strings.Cut(s, ":")
	au := &agentUser{count: 1}
	if lo, hi, isRange := strings.Cut(users, "-"); isRange {
		a, err1 := strconv.Atoi(lo)
		b, err2 := strconv.Atoi(hi)
		if err1 != nil || err2 != nil || b < a {
			return nil, fmt.Errorf("--agent-user %q: a range is FIRST-LAST, two uids, FIRST <= LAST", s)
		}
		au.first, au.count, au.gid = a, b-a+1, a
	} else if n, err := strconv.Atoi(users); err == nil {
		au.first, au.gid = n, n
	} else {
		u, err := user.Lookup(users)
		if err != nil {
			return nil, fmt.Errorf("--agent-user %q: %w", s, err)
		}
		au.first, _ = strconv.Atoi(u.Uid)
		au.gid, _ = strconv.Atoi(u.Gid)
	}
	if hasGroup {
		n, err := strconv.Atoi(group)
		if err != nil {
			g, gerr := user.LookupGroup(group)
			if gerr != nil {
				return nil, fmt.Errorf("--agent-user %q: %w", s, gerr)
			}
			n, _ = strconv.Atoi(g.Gid)
		}
		au.gid = n
	}
	switch {
	case au.first < 0 || au.gid < 0:
		return nil, fmt.Errorf("--agent-user %q: ids must not be negative", s)
	case au.first == 0 || au.gid == 0:
		return nil, fmt.Errorf("--agent-user %q: agents must not run as root", s)
	case os.Geteuid() != 0:
		return nil, fmt.Errorf("--agent-user %q: only an engine running as root can run agents as another user (it runs as uid %d)", s, os.Geteuid())
	case au.first <= os.Getuid() && os.Getuid() < au.first+au.count:
		return nil, fmt.Errorf("--agent-user %q: agents must not run as the engine's user", s)
	}
	return au, nil
}

// autoAgentUID is the first uid of "auto": above the ranges Debian and
// GitHub's runners give to system and login users (and above nobody,
// 65534, which other programs of the machine may run as).
const autoAgentUID = 70000

// uids returns the pool agents take their uid from: every uid of the range
// (one per agent running at once), or the one uid (agents share it).
func (au *agentUser) uids(maxParallel int) (chan int, error) {
	if au.count > 1 && au.count < maxParallel {
		return nil, fmt.Errorf("--agent-user: the range holds %d uids, fewer than the %d agents that run at once (max_parallel)", au.count, maxParallel)
	}
	n := max(au.count, maxParallel)
	pool := make(chan int, n)
	for i := range n {
		pool <- au.first + i%au.count
	}
	return pool, nil
}

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

// agentHomes holds the HOME of each attempt of an agent running as
// another user (see takeAgentUser).
func (j *job) agentHomes() string { return filepath.Join(j.paths.WorktreeRoot(), agentHomesName) }

// agentHomesName is the directory of agentHomes in the job's worktree
// directory; it is not a worktree.
const agentHomesName = ".agent-homes"

// agentIdentity is who one attempt's agent is: the user it runs as and its
// HOME; nil when agents run as the engine.
type agentIdentity struct {
	owner gitops.Owner
	home  string
}

// takeAgentUser gives an attempt its user (from the pool: while it runs no
// other agent has that uid, when the range allows) and a fresh, empty HOME
// of theirs, so nothing an earlier agent left in a HOME reaches it. The
// returned function gives both back; call it once every process of the
// attempt has ended.
func (j *job) takeAgentUser(name string) (*agentIdentity, func(), error) {
	if j.agentUser == nil {
		return nil, func() {}, nil
	}
	uid := <-j.agentUIDs
	id := &agentIdentity{owner: gitops.Owner{UID: uid, GID: j.agentUser.gid}, home: filepath.Join(j.agentHomes(), name)}
	release := func() {
		_ = os.RemoveAll(id.home)
		j.agentUIDs <- uid
	}
	_ = os.RemoveAll(id.home)
	if err := os.Mkdir(id.home, 0o700); err != nil {
		release()
		return nil, func() {}, fmt.Errorf("make the agent's home %s: %w", id.home, err)
	}
	if err := os.Lchown(id.home, uid, j.agentUser.gid); err != nil {
		release()
		return nil, func() {}, fmt.Errorf("give the agent's home %s to uid %d: %w", id.home, uid, err)
	}
	return id, release, nil
}

// prepareAgentUser makes the directory of the agents' homes and checks, as the agents' user,
// that they can reach the worktrees and read the repository's objects: a
// clear error before any item runs rather than every item failing.
func (j *job) prepareAgentUser(ctx context.Context) error {
	if j.agentUser == nil {
		return nil
	}
	o := gitops.Owner{UID: j.agentUser.first, GID: j.agentUser.gid}
	if err := os.MkdirAll(j.agentHomes(), 0o711); err != nil {
		return fmt.Errorf("make the agents' homes in %s: %w", j.agentHomes(), err)
	}
	objects := filepath.Join(j.git.CommonDir(), "objects")
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", `test -x "$1" || exit 3; test -r "$2" && test -x "$2" || exit 4`, "sh", j.paths.WorktreeRoot(), objects)
	cmd.SysProcAttr = procsup.SysProcAttr(credentialOf(&o))
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ee) && ee.ExitCode() == 3:
		return fmt.Errorf("agents running as %d cannot reach their worktrees under %s: every directory above it must be searchable by them (chmod o+x), or set PRODIGY_HOME to a directory they can reach (or run agents as the engine: no --agent-user; the Action's agent-user: off)", o.UID, j.paths.WorktreeRoot())
	case errors.As(err, &ee) && ee.ExitCode() == 4:
		return fmt.Errorf("agents running as %d cannot read the repository's objects at %s (their git reads them): make it and the directories above it readable and searchable by them (or run agents as the engine: no --agent-user; the Action's agent-user: off)", o.UID, objects)
	}
	return fmt.Errorf("check what agents running as %d can reach: %w", o.UID, err)
}
