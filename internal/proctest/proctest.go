//go:build linux

// Package proctest answers, for tests, whether processes a test started
// (and then killed, or expected to be ended) are gone.
package proctest

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Gone reports whether pid has exited: no such process, or a zombie
// nobody reaped yet (its state in /proc/PID/stat is Z).
func Gone(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	// The state follows the command name, which may hold ')' itself.
	i := bytes.LastIndexByte(data, ')')
	return i >= 0 && len(data) > i+2 && data[i+2] == 'Z'
}

// WaitGone polls until every pid is Gone. After a generous bound (the
// processes are being SIGKILLed: this takes milliseconds) it kills the
// ones still alive and fails the test, naming what they were.
func WaitGone(t testing.TB, what string, pids ...int) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		var alive []int
		for _, pid := range pids {
			if !Gone(pid) {
				alive = append(alive, pid)
			}
		}
		if len(alive) == 0 {
			return
		}
		if time.Now().After(deadline) {
			for _, pid := range alive {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
			t.Fatalf("%s: processes %v still alive (all: %v)", what, alive, pids)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Bash returns the path of bash, skipping the test when there is none.
func Bash(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	return p
}

// ReadPIDs reads the whitespace-separated pids a test's processes wrote to
// path.
func ReadPIDs(t testing.TB, path string) []int {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, f := range strings.Fields(string(data)) {
		n, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("pid file %s: %q", path, data)
		}
		pids = append(pids, n)
	}
	return pids
}
