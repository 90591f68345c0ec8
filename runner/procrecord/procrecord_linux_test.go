//go:build linux

package procrecord

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prodigy-action/prodigy-action/internal/procsup"
	"github.com/prodigy-action/prodigy-action/internal/proctest"
	"github.com/prodigy-action/prodigy-action/jobstore"
)

// resume ends what an earlier run of the job left running: a recorded
// group (even a member whose environment was cleared) and every process
// tagged with the job, also outside the group.
func TestEndLeftoversEndsRecordedGroupsAndTaggedProcesses(t *testing.T) {
	t.Parallel()
	p, rec := openRecord(t)
	pidfile := filepath.Join(t.TempDir(), "pids")
	tag := "test/" + rec.JobKey() + "/1"
	// Started as an earlier runner would have: not through procs, so
	// nothing in this process ends it.
	cmd := exec.Command(proctest.Bash(t), "-c", fmt.Sprintf(`
setsid sleep 300 </dev/null >/dev/null 2>&1 & echo $! >> %[1]q
env -i sleep 301 </dev/null >/dev/null 2>&1 & echo $! >> %[1]q
sleep 302`, pidfile))
	cmd.Env = append(os.Environ(), procsup.TagEnv+"="+tag)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitErr := make(chan error, 1)
	go func() { waitErr <- cmd.Wait() }()
	if err := rec.Started(procsup.Identify(cmd.Process.Pid, tag)); err != nil {
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
	pids := append(proctest.ReadPIDs(t, pidfile), cmd.Process.Pid)

	// Another job's record and tag must not be touched.
	other := jobstore.Paths{Home: p.Home, Repo: "repo", JobID: "job-2"}
	if err := EndLeftovers(other, t.Logf); err != nil {
		t.Fatal(err)
	}
	for _, pid := range pids {
		if proctest.Gone(pid) {
			t.Fatalf("process %d of job-1 ended by job-2's resume", pid)
		}
	}

	var logged []string
	err := EndLeftovers(p, func(f string, a ...any) { logged = append(logged, fmt.Sprintf(f, a...)) })
	if err != nil {
		t.Fatal(err)
	}
	<-waitErr
	for _, pid := range pids {
		if !proctest.Gone(pid) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Errorf("process %d survived EndLeftovers", pid)
		}
	}
	if len(logged) != 1 || !strings.Contains(logged[0], "earlier run of job job-1") {
		t.Errorf("log = %q", logged)
	}
}

func TestProcessRecordCompactsAndReplays(t *testing.T) {
	t.Parallel()
	p, rec := openRecord(t)
	keep := procsup.Group{PGID: 1 << 22, Tag: "n/k/0"}
	if err := rec.Started(keep); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 500; i++ {
		g := procsup.Group{PGID: i, Tag: fmt.Sprintf("n/k/%d", i)}
		if err := rec.Started(g); err != nil {
			t.Fatal(err)
		}
		if err := rec.Ended(g); err != nil {
			t.Fatal(err)
		}
	}
	live, err := jobstore.ReadProcessRecord(p)
	if err != nil || len(live) != 1 || live[0].PGID != keep.PGID {
		t.Fatalf("live = %+v, %v", live, err)
	}
	data, _ := os.ReadFile(p.ProcessRecord())
	if n := bytes.Count(data, []byte("\n")); n > 70 {
		t.Fatalf("record not compacted: %d lines", n)
	}
	if err := rec.Ended(keep); err != nil {
		t.Fatal(err)
	}
	if live, _ := jobstore.ReadProcessRecord(p); len(live) != 0 {
		t.Fatalf("live = %+v", live)
	}
}

// openRecord opens a fresh process record of a job "job-1" in a home of
// its own, closed when the test ends.
func openRecord(t *testing.T) (jobstore.Paths, *Record) {
	t.Helper()
	p := jobstore.Paths{Home: t.TempDir(), Repo: "repo", JobID: "job-1"}
	if err := os.MkdirAll(p.JobStateDir(), 0o755); err != nil {
		t.Fatal(err)
	}
	rec, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rec.Close)
	return p, rec
}
