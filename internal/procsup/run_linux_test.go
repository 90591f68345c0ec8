//go:build linux

package procsup

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prodigy-action/prodigy-action/internal/proctest"
)

func TestOutputOfShortBackgroundJobIsKept(t *testing.T) {
	t.Parallel()
	var log bytes.Buffer
	res := Run(context.Background(), Spec{
		Path: proctest.Bash(t), Args: []string{"-c", `(sleep 0.2; echo late) & echo early`},
		Stderr: &log, OutputGrace: 10 * time.Second,
	})
	if res.ExitCode != 0 || string(res.Stdout) != "early\nlate\n" {
		t.Fatalf("result = %+v stdout %q", res, res.Stdout)
	}
	if strings.Contains(log.String(), "dropped") {
		t.Fatalf("unexpected note: %q", log.String())
	}
}

// A step's descendants end with the step, also the ones that left its
// process group with setsid, directly or from a grandchild that was still
// running when the step exited.
func TestStepEndEndsSetsidDescendants(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pidfile := filepath.Join(dir, "pids")
	script := fmt.Sprintf(`
setsid sleep 300 </dev/null >/dev/null 2>&1 &
echo $! >> %[1]q
bash -c 'setsid sleep 301 </dev/null >/dev/null 2>&1 & echo $! >> %[1]q; sleep 302' </dev/null >/dev/null 2>&1 &
echo $! >> %[1]q
for i in $(seq 100); do [ "$(wc -l < %[1]q)" -ge 3 ] && break; sleep 0.05; done
exit 0
`, pidfile)
	res := Run(context.Background(), Spec{Path: proctest.Bash(t), Args: []string{"-c", script}})
	if res.ExitCode != 0 || res.StartErr != nil {
		t.Fatalf("result = %+v %s", res, res.Tail)
	}
	pids := proctest.ReadPIDs(t, pidfile)
	if len(pids) != 3 {
		t.Fatalf("pids = %v", pids)
	}
	// runProcess returns once they are gone: check at once, no waiting.
	for _, pid := range pids {
		if !proctest.Gone(pid) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Errorf("process %d outlived its step", pid)
		}
	}
}

func TestParseProcStat(t *testing.T) {
	st, err := parseProcStat([]byte("42 (a (b) c) S 1 40 39 0 -1 4194560 1 2 3 4 5 6 7 8 20 0 1 0 987654 1 2"))
	if err != nil || st.state != 'S' || st.pgrp != 40 || st.session != 39 || st.start != 987654 {
		t.Fatalf("%+v %v", st, err)
	}
	if _, err := parseProcStat([]byte("garbage")); err == nil {
		t.Fatal("no error for garbage")
	}
	if tag := tagInEnviron([]byte("A=1\x00PRODIGY_PROCESS_TAG=x/y/1\x00B=2\x00PRODIGY_PROCESS_TAG=x/y/2\x00")); tag != "x/y/2" {
		t.Fatalf("tag = %q", tag)
	}
}
