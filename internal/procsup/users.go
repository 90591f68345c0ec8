package procsup

import (
	"fmt"
	"os"
	"os/user"
	"strconv"
	"strings"
)

// Users are the users agents' processes run as (the engine's
// --agent-user, the Action's agent-user input): uids First..First+Count-1,
// all with group GID, handed out one per agent running at once.
type Users struct {
	First, Count, GID int
	pool              chan int
}

// AutoUID is the first uid of "auto": above the ranges Debian and
// GitHub's runners give to system and login users (and above nobody,
// 65534, which other programs of the machine may run as).
const AutoUID = 70000

// ParseUsers resolves "NAME", "UID", "FIRST-LAST" (a range of uids: every
// agent running at once gets one of its own) with an optional ":GID" or
// ":GROUP" (default: a NAME's primary group, else the first uid's number),
// for at most maxParallel agents at once; nil for "" (agents run as the
// engine). Root, and the engine's own user, are refused: they would be no
// boundary; so is a range smaller than maxParallel.
//
// "auto" is AutoUID onwards, one uid per agent running at once, when the
// engine runs as root, and nil otherwise: the Action's default.
func ParseUsers(s string, maxParallel int) (*Users, error) {
	s = strings.TrimSpace(s)
	if s == "auto" {
		if os.Geteuid() != 0 {
			return nil, nil
		}
		s = fmt.Sprintf("%d-%d", AutoUID, AutoUID+max(1, maxParallel)-1)
	}
	if s == "" {
		return nil, nil
	}
	users, group, hasGroup := strings.Cut(s, ":")
	u := &Users{Count: 1}
	if lo, hi, isRange := strings.Cut(users, "-"); isRange {
		a, err1 := strconv.Atoi(lo)
		b, err2 := strconv.Atoi(hi)
		if err1 != nil || err2 != nil || b < a {
			return nil, fmt.Errorf("--agent-user %q: a range is FIRST-LAST, two uids, FIRST <= LAST", s)
		}
		u.First, u.Count, u.GID = a, b-a+1, a
	} else if n, err := strconv.Atoi(users); err == nil {
		u.First, u.GID = n, n
	} else {
		pw, err := user.Lookup(users)
		if err != nil {
			return nil, fmt.Errorf("--agent-user %q: %w", s, err)
		}
		u.First, _ = strconv.Atoi(pw.Uid)
		u.GID, _ = strconv.Atoi(pw.Gid)
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
		u.GID = n
	}
	switch {
	case u.First < 0 || u.GID < 0:
		return nil, fmt.Errorf("--agent-user %q: ids must not be negative", s)
	case u.First == 0 || u.GID == 0:
		return nil, fmt.Errorf("--agent-user %q: agents must not run as root", s)
	case os.Geteuid() != 0:
		return nil, fmt.Errorf("--agent-user %q: only an engine running as root can run agents as another user (it runs as uid %d)", s, os.Geteuid())
	case u.First <= os.Getuid() && os.Getuid() < u.First+u.Count:
		return nil, fmt.Errorf("--agent-user %q: agents must not run as the engine's user", s)
	case u.Count > 1 && u.Count < maxParallel:
		return nil, fmt.Errorf("--agent-user: the range holds %d uids, fewer than the %d agents that run at once (max_parallel)", u.Count, maxParallel)
	}
	// Every uid of the range (one per agent running at once), or the one
	// uid (agents share it).
	n := max(u.Count, maxParallel)
	u.pool = make(chan int, n)
	for i := range n {
		u.pool <- u.First + i%u.Count
	}
	return u, nil
}

// Take waits for a uid no other agent holds (when the range allows) and
// returns its credential; Give returns it.
func (u *Users) Take() Credential { return Credential{UID: <-u.pool, GID: u.GID} }

// Give returns a credential Take handed out.
func (u *Users) Give(c Credential) { u.pool <- c.UID }
