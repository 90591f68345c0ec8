//go:build linux

package runner

import (
	"bytes"
	"context"
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

	"github.com/prodigy-action/prodigy-action/dlq"
	"github.com/prodigy-action/prodigy-action/internal/proctest"
)

func bashPath(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	return p
}

func readPIDs(t *testing.T, path string) []int {
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

func TestTimeoutIsTimeoutWhateverTheExitStatus(t *testing.T) {
	bash := bashPath(t)
	scripts := map[string]string{
		"killed by SIGTERM (exit 143)": "sleep 30",
		"traps TERM and exits 0":       "trap 'exit 0' TERM; sleep 30 & wait",
		"traps TERM and exits 1":       "trap 'exit 1' TERM; sleep 30 & wait",
	}
	for name, script := range scripts {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			// Many short timeouts at once: the kill races the exit every time.
			var wg sync.WaitGroup
			errs := make(chan string, 40)
			for i := range 20 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					timeout := time.Duration(1+i%5) * 20 * time.Millisecond
					ctx, cancel := context.WithTimeoutCause(context.Background(), timeout, errStepTimeout)
					defer cancel()
					res := runProcess(ctx, procSpec{Path: bash, Args: []string{"-c", script}, Grace: time.Second})
					f := processFailure("shell step 1", res, timeout)
					if f == nil || f.Type.Kind != dlq.Timeout {
						errs <- fmt.Sprintf("exit %d cause %v: %+v", res.ExitCode, res.Cause, f)
					}
				}()
			}
			wg.Wait()
			close(errs)
			for e := range errs {
				t.Error(e)
			}
		})
	}
}

func TestProcessExitIsStepEndWithBackgroundChildHoldingOutput(t *testing.T) {
	t.Parallel()
	bash := bashPath(t)
	var log bytes.Buffer
	res := runProcess(context.Background(), procSpec{
		Path: bash, Args: []string{"-c", `sleep 300 & echo "bg=$!"; echo done`},
		Stderr: &log, OutputGrace: 200 * time.Millisecond,
	})
	if res.StartErr != nil || res.ExitCode != 0 || res.Cause != nil {
		t.Fatalf("result = %+v", res)
	}
	if f := processFailure("shell step 1", res, 0); f != nil {
		t.Fatalf("failure = %+v", f)
	}
	out := string(res.Stdout)
	if !strings.Contains(out, "done") {
		t.Fatalf("stdout = %q", out)
	}
	if !strings.Contains(log.String(), "later output was dropped") {
		t.Fatalf("no note in the log: %q", log.String())
	}
	pid, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(strings.Split(out, "\n")[0], "bg=")))
	if err != nil {
		t.Fatalf("stdout = %q", out)
	}
	proctest.WaitGone(t, "the background child", pid)
}

func TestOutputOfShortBackgroundJobIsKept(t *testing.T) {
	t.Parallel()
	var log bytes.Buffer
	res := runProcess(context.Background(), procSpec{
		Path: bashPath(t), Args: []string{"-c", `(sleep 0.2; echo late) & echo early`},
		Stderr: &log, OutputGrace: 10 * time.Second,
	})
	if res.ExitCode != 0 || string(res.Stdout) != "early\nlate\n" {
		t.Fatalf("result = %+v stdout %q", res, res.Stdout)
	}
	if strings.Contains(log.String(), "dropped") {
		t.Fatalf("unexpected note: %q", log.String())
	}
}

func TestCouldNotRunOnlyWhenTheProcessCannotStart(t *testing.T) {
	t.Parallel()
	res := runProcess(context.Background(), procSpec{Path: filepath.Join(t.TempDir(), "missing")})
	f := processFailure("shell step 1", res, 0)
	if res.StartErr == nil || f == nil || !strings.Contains(f.Message, "could not run") {
		t.Fatalf("missing binary: %+v %+v", res, f)
	}
	res = runProcess(context.Background(), procSpec{Path: bashPath(t), Args: []string{"-c", "exit 3"}})
	f = processFailure("shell step 1", res, 0)
	if res.StartErr != nil || f == nil || f.Type.Kind != dlq.CommandFailed || f.Type.ExitCode != 3 || strings.Contains(f.Message, "could not run") {
		t.Fatalf("exit 3: %+v %+v", res, f)
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
	res := runProcess(context.Background(), procSpec{Path: bashPath(t), Args: []string{"-c", script}})
	if res.ExitCode != 0 || res.StartErr != nil {
		t.Fatalf("result = %+v %s", res, res.Tail)
	}
	pids := readPIDs(t, pidfile)
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

// resume ends what an earlier run of the job left running: a recorded
// group (even a member whose environment was cleared) and every process
// tagged with the job, also outside the group.
func TestEndJobLeftoversEndsRecordedGroupsAndTaggedProcesses(t *testing.T) {
	t.Parallel()
	p := Paths{Home: t.TempDir(), Repo: "repo", JobID: "job-1"}
	if err := os.MkdirAll(p.JobStateDir(), 0o755); err != nil {
		t.Fatal(err)
	}
	rec, err := openProcessRecord(p)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.close()
	pidfile := filepath.Join(t.TempDir(), "pids")
	g := procs.newGroup(rec)
	// Started as an earlier runner would have: not through procs, so
	// nothing in this process ends it.
	cmd := exec.Command(bashPath(t), "-c", fmt.Sprintf(`
setsid sleep 300 </dev/null >/dev/null 2>&1 & echo $! >> %[1]q
env -i sleep 301 </dev/null >/dev/null 2>&1 & echo $! >> %[1]q
sleep 302`, pidfile))
	cmd.Env = append(os.Environ(), processTagEnv+"="+g.tag)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitErr := make(chan error, 1)
	go func() { waitErr <- cmd.Wait() }()
	g.pgid = cmd.Process.Pid
	if err := rec.started(g); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if data, _ := os.ReadFile(pidfile); strings.Count(string(data), "\n") >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the step did not start its children")
		}
		time.Sleep(10 * time.Millisecond)
	}
	pids := append(readPIDs(t, pidfile), cmd.Process.Pid)

	// Another job's record and tag must not be touched.
	other := Paths{Home: p.Home, Repo: "repo", JobID: "job-2"}
	if err := endJobLeftovers(other, t.Logf); err != nil {
		t.Fatal(err)
	}
	for _, pid := range pids {
		if proctest.Gone(pid) {
			t.Fatalf("process %d of job-1 ended by job-2's resume", pid)
		}
	}

	var logged []string
	err = endJobLeftovers(p, func(f string, a ...any) { logged = append(logged, fmt.Sprintf(f, a...)) })
	if err != nil {
		t.Fatal(err)
	}
	<-waitErr
	for _, pid := range pids {
		if !proctest.Gone(pid) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Errorf("process %d survived endJobLeftovers", pid)
		}
	}
	if len(logged) != 1 || !strings.Contains(logged[0], "earlier run of job job-1") {
		t.Errorf("log = %q", logged)
	}
}

func TestProcessRecordCompactsAndReplays(t *testing.T) {
	t.Parallel()
	p := Paths{Home: t.TempDir(), Repo: "repo", JobID: "job-1"}
	if err := os.MkdirAll(p.JobStateDir(), 0o755); err != nil {
		t.Fatal(err)
	}
	rec, err := openProcessRecord(p)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.close()
	keep := &stepGroup{pgid: 1 << 22, tag: "n/k/0"}
	if err := rec.started(keep); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 500; i++ {
		g := &stepGroup{pgid: i, tag: fmt.Sprintf("n/k/%d", i)}
		if err := rec.started(g); err != nil {
			t.Fatal(err)
		}
		if err := rec.ended(g); err != nil {
			t.Fatal(err)
		}
	}
	live, err := readProcessRecord(p)
	if err != nil || len(live) != 1 || live[0].PGID != keep.pgid {
		t.Fatalf("live = %+v, %v", live, err)
	}
	data, _ := os.ReadFile(processGroupsFile(p))
	if n := bytes.Count(data, []byte("\n")); n > 70 {
		t.Fatalf("record not compacted: %d lines", n)
	}
	if err := rec.ended(keep); err != nil {
		t.Fatal(err)
	}
	if live, _ := readProcessRecord(p); len(live) != 0 {
		t.Fatalf("live = %+v", live)
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
