//go:build linux

package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prodigy-action/prodigy-action/internal/proctest"
)

func TestSecondInterruptEndsTheAgentsBeforeExiting(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns a process")
	}
	repo := cliRepo(t, map[string]string{"items.json": `[{"n": 1}, {"n": 2}]`})
	pidDir := t.TempDir()
	wfPath := filepath.Join(t.TempDir(), "wf.yml")
	// The agents ignore SIGTERM, so only the hard abort can end them.
	wf := fmt.Sprintf(`
name: abort
mode: mapreduce
map:
  input: items.json
  max_parallel: 2
  agent_template:
    - shell: |
        trap '' TERM
        sleep 300 </dev/null >/dev/null 2>&1 &
        c=$!
        setsid sleep 301 </dev/null >/dev/null 2>&1 &
        echo "$$ $c $!" > %[1]q/$$.tmp && mv %[1]q/$$.tmp %[1]q/$$.pids
        wait
`, pidDir)
	if err := os.WriteFile(wfPath, []byte(wf), 0o644); err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(t.TempDir(), "home")
	cmd := exec.Command(os.Args[0], "run", wfPath, "--repo", repo, "--job-id", "abort")
	cmd.Env = append(os.Environ(), "PRODIGY_ACTION_TEST_MAIN=1", "PRODIGY_HOME="+home)
	var stderr syncedBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var pids []int
	t.Cleanup(func() {
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(2 * time.Minute)
		for !ok() {
			if time.Now().After(deadline) {
				_ = cmd.Process.Kill()
				t.Fatalf("%s:\n%s", what, stderr.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitFor("the agents did not start", func() bool {
		files, _ := filepath.Glob(filepath.Join(pidDir, "*.pids"))
		if len(files) < 2 {
			return false
		}
		pids = pids[:0]
		for _, f := range files {
			data, _ := os.ReadFile(f)
			for _, s := range strings.Fields(string(data)) {
				if n, err := strconv.Atoi(s); err == nil {
					pids = append(pids, n)
				}
			}
		}
		return true
	})
	if len(pids) != 6 {
		t.Fatalf("pids = %v", pids)
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	waitFor("no sign of the first interrupt", func() bool { return strings.Contains(stderr.String(), "interrupt received") })
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 130 {
		t.Fatalf("exit = %v, want 130\n%s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "ended 2 agent process group(s)") {
		t.Errorf("stderr does not say the agents were ended:\n%s", stderr.String())
	}
	// Ended before the CLI exited: no waiting here.
	for _, pid := range pids {
		if !proctest.Gone(pid) {
			t.Errorf("process %d outlived the CLI", pid)
		}
	}
}

// syncedBuffer is a bytes.Buffer safe for a writing process and a reading test.
type syncedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncedBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncedBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
