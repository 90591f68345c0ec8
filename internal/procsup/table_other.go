//go:build !linux

package procsup

import (
	"errors"
	"fmt"
	"os/exec"
	"syscall"
	"time"
)

// procTablePlatform has no state outside Linux: there is no subreaper,
// parent-death signal or /proc, so only the step's process group is ended.
type procTablePlatform struct{}

func stepSysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

func (t *procTable) start(cmd *exec.Cmd, g *stepGroup) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := cmd.Start(); err != nil {
		return err
	}
	g.pgid = cmd.Process.Pid
	t.live[g.pgid] = g
	return nil
}

func (t *procTable) end(g *stepGroup, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	defer func() {
		t.mu.Lock()
		delete(t.live, g.pgid)
		t.mu.Unlock()
	}()
	for {
		if err := syscall.Kill(-g.pgid, syscall.SIGKILL); errors.Is(err, syscall.ESRCH) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes of the step (process group %d) were still running %s after it ended", g.pgid, limit)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// KillProcesses ends at once (SIGKILL) every step process group this
// process runs and returns their number. See the Linux version.
func KillProcesses() int {
	t := procs
	t.mu.Lock()
	defer t.mu.Unlock()
	for pgid := range t.live {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
	return len(t.live)
}

// EndLeftovers cannot tell a recorded group from a reused pgid without
// /proc, so it ends nothing outside Linux.
func EndLeftovers(string, string, []Group) (int, error) { return 0, nil }

func leaderIdentity(int) (string, uint64) { return "", 0 }
