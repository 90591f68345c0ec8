//go:build linux

package runner_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prodigy-action/prodigy-action/config"
	"github.com/prodigy-action/prodigy-action/internal/proctest"
)

// The runner process of TestKillNineOfTheRunnerEndsItsAgents is this test
// binary, re-executed to run only TestRunnerProcessHelper with these
// variables set.
const (
	helperWorkflowEnv = "PRODIGY_TEST_RUNNER_WORKFLOW"
	helperRepoEnv     = "PRODIGY_TEST_RUNNER_REPO"
	helperHomeEnv     = "PRODIGY_TEST_RUNNER_HOME"
)

// TestRunnerProcessHelper is not a test on its own: it is the runner that
// TestKillNineOfTheRunnerEndsItsAgents kills.
func TestRunnerProcessHelper(t *testing.T) {
	wfPath := os.Getenv(helperWorkflowEnv)
	if wfPath == "" {
		t.Skip("the runner process of TestKillNineOfTheRunnerEndsItsAgents")
	}
	wf, err := config.Load(wfPath)
	if err != nil {
		t.Fatal(err)
	}
	res, err := runJob(context.Background(), Options{
		Workflow: wf, RepoDir: os.Getenv(helperRepoEnv), Home: os.Getenv(helperHomeEnv), JobID: "job-1",
		Stderr: os.Stderr, Getenv: func(string) string { return "" },
	})
	t.Fatalf("the runner was meant to be killed, but it returned: %+v %v", res, err)
}

func TestKillNineOfTheRunnerEndsItsAgents(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns a runner process")
	}
	t.Parallel()
	r := newTestRepo(t, map[string]string{"items.json": `[{"id": 1}, {"id": 2}]`})
	pidDir := t.TempDir()
	resumed := filepath.Join(pidDir, "resumed")
	// Each agent starts: a child in its group, a child that left it with
	// setsid, and a setsid'd grandchild under a group member; then writes
	// their pids and sleeps. After the kill, the resumed run commits.
	wf := r.Workflow(fmt.Sprintf(`
name: kill-nine
mode: mapreduce
map:
  input: items.json
  max_parallel: 2
  agent_template:
    - shell: |
        if [ -e %[2]q ]; then
          echo "$PRODIGY_ITEM_ID" > "out-$PRODIGY_ITEM_ID.txt" && git add . && git commit -qm "item $PRODIGY_ITEM_ID"
          exit
        fi
        sleep 300 </dev/null >/dev/null 2>&1 &
        c=$!
        setsid sleep 301 </dev/null >/dev/null 2>&1 &
        s=$!
        bash -c 'setsid sleep 302 </dev/null >/dev/null 2>&1 & echo $! > "$0"; sleep 303' %[1]q/$$.grand </dev/null >/dev/null 2>&1 &
        b=$!
        while [ ! -s %[1]q/$$.grand ]; do sleep 0.02; done
        echo "$$ $c $s $b $(cat %[1]q/$$.grand)" > %[1]q/$$.tmp && mv %[1]q/$$.tmp %[1]q/$$.pids
        sleep 304
`, pidDir, resumed))
	var stderr syncBuffer
	cmd := exec.Command(os.Args[0], "-test.run=^TestRunnerProcessHelper$", "-test.count=1")
	cmd.Env = append(os.Environ(), helperWorkflowEnv+"="+wf.Path, helperRepoEnv+"="+r.Dir, helperHomeEnv+"="+r.Home)
	cmd.Stdout = &stderr
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var pids []int
	deadline := time.Now().Add(2 * time.Minute)
	for {
		files, _ := filepath.Glob(filepath.Join(pidDir, "*.pids"))
		if len(files) == 2 {
			for _, f := range files {
				data, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				for _, s := range strings.Fields(string(data)) {
					n, err := strconv.Atoi(s)
					if err != nil {
						t.Fatalf("%s: %q", f, data)
					}
					pids = append(pids, n)
				}
			}
			break
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			t.Fatalf("the agents did not start:\n%s", stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(pids) != 10 {
		t.Fatalf("pids = %v", pids)
	}
	t.Cleanup(func() {
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()

	proctest.WaitGone(t, "processes of the killed runner's agents", pids...)

	// The job resumes and finishes.
	if err := os.WriteFile(resumed, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var out syncBuffer
	res, err := resumeJob(context.Background(), ResumeOptions{
		Home: r.Home, JobID: "job-1",
		Run: Options{Stderr: &out, Getenv: func(string) string { return "" }},
	})
	if err != nil || res.Successful != 2 {
		t.Fatalf("resume: %v %+v\n%s", err, res, out.String())
	}
}

// `npm start &`: a step that exits 0 while a background child holds its
// output succeeds; the child is ended with the step, and the log says why
// output stopped.
func TestStepLeavingBackgroundChildHoldingOutputSucceeds(t *testing.T) {
	t.Parallel()
	r := newTestRepo(t, map[string]string{"items.json": `[{"id": 1}]`})
	pidDir := t.TempDir()
	wf := r.Workflow(fmt.Sprintf(`
name: background
mode: mapreduce
setup:
  - shell: sleep 300 & echo $! > %[1]q/setup; echo setup-done
map:
  input: items.json
  agent_template:
    - shell: |
        sleep 301 & echo $! > %[1]q/agent
        echo x > f.txt && git add f.txt && git commit -qm x
`, pidDir))
	o, _, stderr, _ := r.options(wf)
	res, err := r.run(o)
	if err != nil || res.Successful != 1 || res.Failed != 0 {
		t.Fatalf("run: %v %+v\n%s", err, res, stderr)
	}
	if !strings.Contains(stderr.String(), "later output was dropped") {
		t.Errorf("no note about the dropped output:\n%s", stderr)
	}
	for _, name := range []string{"setup", "agent"} {
		data, err := os.ReadFile(filepath.Join(pidDir, name))
		if err != nil {
			t.Fatal(err)
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
		if err != nil {
			t.Fatalf("%s: %q", name, data)
		}
		// The step ends once its processes are gone: no waiting here.
		if !proctest.Gone(pid) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Errorf("the %s step's background child %d outlived it", name, pid)
		}
	}
}
