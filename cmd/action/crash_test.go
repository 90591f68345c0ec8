package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prodigy-action/prodigy-action/dlq"
	"github.com/prodigy-action/prodigy-action/jobstore"
	"github.com/prodigy-action/prodigy-action/runner"
)

// installFaultHook arms the runner's fault hook in a re-executed test
// binary from PRODIGY_TEST_FAULT=<point>:<n>:<KILL|INT>: at the n-th time
// the job reaches the fault point the process sends itself SIGKILL (and
// never continues) or SIGINT (and waits until the job has seen the
// interrupt). Only the test binary does this; the real CLI has no hook.
func installFaultHook() {
	spec := os.Getenv("PRODIGY_TEST_FAULT")
	if spec == "" {
		return
	}
	parts := strings.Split(spec, ":")
	if len(parts) != 3 {
		fmt.Fprintf(os.Stderr, "PRODIGY_TEST_FAULT=%q: want <point>:<n>:<KILL|INT>\n", spec)
		os.Exit(3)
	}
	point, sig := parts[0], parts[2]
	n, err := strconv.Atoi(parts[1])
	if err != nil {
		fmt.Fprintf(os.Stderr, "PRODIGY_TEST_FAULT=%q: %v\n", spec, err)
		os.Exit(3)
	}
	var hits atomic.Int64
	runner.SetFaultHook(func(ctx context.Context, p, _ string) {
		if p != point || hits.Add(1) != int64(n) {
			return
		}
		switch sig {
		case "KILL":
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {} // SIGKILL cannot be caught: nothing after this runs
		case "INT":
			_ = syscall.Kill(os.Getpid(), syscall.SIGINT)
			select {
			case <-ctx.Done():
			case <-time.After(30 * time.Second):
			}
		}
	})
}

// crashEnv is one job for the crash tests: a repository whose items.json
// has items 0..n-1 (odd ones fail until the file `fixed` exists), a
// workflow with retries and two reduce steps (the first commits), and
// counters outside the repository of the attempts really run.
type crashEnv struct {
	t                  *testing.T
	repo, home, wfPath string
	counters, fixed    string
	jobID              string
	items              int
	attempts           int
	head               string
}

func newCrashEnv(t *testing.T, items, attempts, parallel int, sleep string) *crashEnv {
	t.Helper()
	var list []string
	for i := range items {
		list = append(list, fmt.Sprintf(`{"n": %d, "fail": %t}`, i, i%2 == 1))
	}
	e := &crashEnv{t: t, items: items, attempts: attempts, jobID: "crash"}
	e.repo = cliRepo(t, map[string]string{"items.json": "[" + strings.Join(list, ",") + "]"})
	base := t.TempDir()
	e.home = filepath.Join(base, "home")
	e.counters = filepath.Join(base, "counters")
	e.fixed = filepath.Join(base, "fixed")
	if err := os.MkdirAll(e.counters, 0o755); err != nil {
		t.Fatal(err)
	}
	e.wfPath = filepath.Join(base, "wf.yml")
	wf := fmt.Sprintf(`
name: crash
mode: mapreduce
map:
  input: items.json
  max_parallel: %d
  error_policy:
    on_item_failure: dlq
    continue_on_failure: true
    retry_config:
      max_attempts: %d
      backoff: {fixed: {delay: 1ms}}
  agent_template:
    - shell: |
        sleep %s
        if [ "${item.fail}" = "true" ] && [ ! -e %q ]; then
          echo "item ${item.n} attempt ${attempt} failed" >&2
          echo "${attempt}" >> %q/fail-${item.n}
          exit 3
        fi
        echo "${item.n}" > "out-${item.n}.txt" && git add . && git commit -qm "item ${item.n}"
reduce:
  - shell: echo "${map.successful}" > reduce.txt && git add reduce.txt && git commit -qm "reduce step 1" && echo "token-${map.successful}"
    capture_output: r1
  - shell: echo "${r1}" >> %q/reduce-2
`, parallel, attempts, sleep, e.fixed, e.counters, e.counters)
	if err := os.WriteFile(e.wfPath, []byte(wf), 0o644); err != nil {
		t.Fatal(err)
	}
	e.head = gitOut(t, e.repo, "rev-parse", "HEAD")
	return e
}

// spawn starts the real CLI (this test binary re-executed) with an
// optional fault spec.
func (e *crashEnv) spawn(fault string, args ...string) (*exec.Cmd, *bytes.Buffer) {
	e.t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "PRODIGY_ACTION_TEST_MAIN=1", "PRODIGY_HOME="+e.home, "PRODIGY_TEST_FAULT="+fault)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.Stdout = &stderr
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	return cmd, &stderr
}

// runFault runs the CLI until the fault ends it and checks how it ended:
// killed by SIGKILL, or exit code 130 after SIGINT.
func (e *crashEnv) runFault(fault string, args ...string) {
	e.t.Helper()
	cmd, stderr := e.spawn(fault, args...)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(2 * time.Minute):
		_ = cmd.Process.Kill()
		e.t.Fatalf("%v did not reach fault %s:\n%s", args, fault, stderr)
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		e.t.Fatalf("%v with fault %s: exit %v, want the fault to end it\n%s", args, fault, err, stderr)
	}
	ws := ee.Sys().(syscall.WaitStatus)
	switch {
	case strings.HasSuffix(fault, ":KILL") && !(ws.Signaled() && ws.Signal() == syscall.SIGKILL):
		e.t.Fatalf("%v with fault %s: %v, want death by SIGKILL\n%s", args, fault, err, stderr)
	case strings.HasSuffix(fault, ":INT") && ee.ExitCode() != 130:
		e.t.Fatalf("%v with fault %s: %v, want exit 130\n%s", args, fault, err, stderr)
	}
}

func (e *crashEnv) runArgs() []string {
	return []string{"run", e.wfPath, "--repo", e.repo, "--job-id", e.jobID}
}

// cli runs the CLI in-process and wants exit code want.
func (e *crashEnv) cli(want int, args ...string) string {
	e.t.Helper()
	code, out, errOut := runCLI(e.t, e.home, args...)
	if code != want {
		e.t.Fatalf("%v: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", args, code, want, out, errOut)
	}
	return out
}

// failCount is the number of attempts of item n that really ran and failed.
func (e *crashEnv) failCount(n int) int {
	data, err := os.ReadFile(filepath.Join(e.counters, fmt.Sprintf("fail-%d", n)))
	if errors.Is(err, os.ErrNotExist) {
		return 0
	}
	if err != nil {
		e.t.Fatal(err)
	}
	return strings.Count(string(data), "\n")
}

// check asserts the bookkeeping invariants after the job completed:
// every success merged exactly once, every failure exactly one DLQ record
// whose history is the attempts really run (exactly, unless loose: a kill
// in the middle of an attempt loses that attempt, which then runs again),
// index.json equal to items/, no stray worktree or branch, the user's
// checkout untouched, reduce's commit made once per completed reduce.
func (e *crashEnv) check(succeeded, failed []int, reduceRuns int, loose bool) {
	t := e.t
	t.Helper()
	st := e.cli(0, "status", e.jobID, "--json")
	if !strings.Contains(st, `"status": "completed"`) {
		t.Errorf("status after recovery:\n%s", st)
	}
	branch := "prodigy/" + e.jobID
	merges := map[string]int{}
	for _, l := range strings.Split(gitOut(t, e.repo, "log", "--merges", "--format=%(trailers:key=Prodigy-Item,valueonly)", branch), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			id, err := strconv.Unquote(l)
			if err != nil {
				t.Fatalf("trailer %q: %v", l, err)
			}
			merges[id]++
		}
	}
	want := map[string]int{}
	for _, n := range succeeded {
		want[itemID(n)] = 1
	}
	if fmt.Sprint(merges) != fmt.Sprint(want) {
		t.Errorf("merge commits per item = %v, want %v", merges, want)
	}
	if n := strings.Count(gitOut(t, e.repo, "log", "--format=%s", branch), "reduce step 1"); n != reduceRuns {
		t.Errorf("%d reduce commits on the results branch, want %d", n, reduceRuns)
	}
	// reduce step 2 always sees step 1's capture, also when only step 2
	// ran again after a crash.
	r2, err := os.ReadFile(filepath.Join(e.counters, "reduce-2"))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(strings.TrimSpace(string(r2)), "\n") {
		if !strings.HasPrefix(l, "token-") || l == "token-" {
			t.Errorf("reduce step 2 ran with r1 = %q", l)
		}
	}

	root := jobstore.Paths{Home: e.home, Repo: "repo", JobID: e.jobID}.DLQRoot()
	dir := dlq.Dir(root, e.jobID)
	recs := map[string]dlq.DeadLetteredItem{}
	files, _ := filepath.Glob(filepath.Join(dir, "items", "*.json"))
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		rec, err := dlq.Decode(data)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if _, dup := recs[rec.ItemID]; dup {
			t.Errorf("two records for %s", rec.ItemID)
		}
		recs[rec.ItemID] = rec
	}
	var idx struct {
		ItemIDs []string `json:"item_ids"`
	}
	if data, err := os.ReadFile(filepath.Join(dir, "index.json")); err == nil {
		if err := json.Unmarshal(data, &idx); err != nil {
			t.Fatal(err)
		}
	} else if len(recs) > 0 {
		t.Errorf("no index.json for %d records: %v", len(recs), err)
	}
	var inItems []string
	for id := range recs {
		inItems = append(inItems, id)
	}
	sort.Strings(inItems)
	sort.Strings(idx.ItemIDs)
	if fmt.Sprint(inItems) != fmt.Sprint(idx.ItemIDs) {
		t.Errorf("index.json %v != items/ %v", idx.ItemIDs, inItems)
	}
	if len(recs) != len(failed) {
		t.Errorf("%d DLQ records (%v), want %d (%v)", len(recs), inItems, len(failed), failed)
	}
	for _, n := range failed {
		rec, ok := recs[itemID(n)]
		if !ok {
			t.Errorf("item %d has no DLQ record", n)
			continue
		}
		ran := e.failCount(n)
		var nums []int
		lost := map[int]bool{}
		for _, f := range rec.FailureHistory {
			nums = append(nums, int(f.AttemptNumber))
			if strings.Contains(f.ErrorMessage, "was running when the process running the job died") {
				lost[int(f.AttemptNumber)] = true
			}
		}
		// The attempt numbers the step itself wrote (one line per run
		// that reached its failing exit).
		echoed := map[int]int{}
		if data, err := os.ReadFile(filepath.Join(e.counters, fmt.Sprintf("fail-%d", n))); err == nil {
			for _, l := range strings.Fields(string(data)) {
				a, _ := strconv.Atoi(l)
				echoed[a]++
			}
		}
		for i, a := range nums {
			if a != i+1 {
				t.Errorf("item %d: attempt numbers %v, want 1..%d", n, nums, len(nums))
				break
			}
		}
		if int(rec.FailureCount) != len(nums) {
			t.Errorf("item %d: failure_count %d, history %d", n, rec.FailureCount, len(nums))
		}
		// Every attempt that ran is exactly one entry: an attempt number
		// runs once (a kill does not make it run again), every number the
		// step wrote has its entry, and an entry whose run the step never
		// reached is the record of an attempt the kill cut short. Without
		// kills (loose false) no attempt is lost.
		for a, k := range echoed {
			if k > 1 {
				t.Errorf("item %d: attempt %d ran %d times", n, a, k)
			}
			if !slices.Contains(nums, a) {
				t.Errorf("item %d: attempt %d ran but has no failure_history entry (%v)", n, a, nums)
			}
		}
		for _, a := range nums {
			if echoed[a] == 0 && !lost[a] {
				t.Errorf("item %d: entry for attempt %d, which never ran", n, a)
			}
		}
		if !loose && (len(lost) > 0 || len(nums) != ran) {
			t.Errorf("item %d: failure_history has %d entries (%d lost), %d attempts really ran", n, len(nums), len(lost), ran)
		}
		if len(nums)-len(lost) != e.attempts {
			t.Errorf("item %d: %d attempts recorded (%d lost to a kill, which do not count), the budget is %d", n, len(nums), len(lost), e.attempts)
		}
	}

	if wt := gitOut(t, e.repo, "worktree", "list", "--porcelain"); strings.Count(wt, "worktree ") != 1 {
		t.Errorf("stray worktrees:\n%s", wt)
	}
	if refs := gitOut(t, e.repo, "for-each-ref", "--format=%(refname)", "refs/heads/"); refs != "refs/heads/main\nrefs/heads/"+branch {
		t.Errorf("branches after recovery:\n%s", refs)
	}
	if got := gitOut(t, e.repo, "rev-parse", "HEAD"); got != e.head {
		t.Errorf("user's HEAD moved: %s -> %s", e.head, got)
	}
	if got := gitOut(t, e.repo, "rev-parse", "--abbrev-ref", "HEAD"); got != "main" {
		t.Errorf("user's branch is %s", got)
	}
	if got := gitOut(t, e.repo, "status", "--porcelain"); got != "" {
		t.Errorf("user's checkout is dirty:\n%s", got)
	}
}

// itemID is the id the runner gives item n (items without an id field).
func itemID(n int) string { return fmt.Sprintf("item_%d", n) }

func evens(n int) (out []int) {
	for i := 0; i < n; i += 2 {
		out = append(out, i)
	}
	return out
}

func odds(n int) (out []int) {
	for i := 1; i < n; i += 2 {
		out = append(out, i)
	}
	return out
}

// TestCrashWindows kills the real CLI (SIGKILL, or SIGINT where noted) at
// each named moment of a job, placed by the runner's fault points, then
// finishes the job and checks the bookkeeping invariants.
func TestCrashWindows(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns and kills processes")
	}
	const items, attempts = 4, 3
	for _, tc := range []struct {
		name, fault string
	}{
		{"job creation: checkpoint written, no results branch", runner.FaultJobIntent + ":1:KILL"},
		{"job creation: parent worktree made, setup not started", runner.FaultJobCreated + ":1:KILL"},
		{"items loaded, setup not recorded done", runner.FaultItemsLoaded + ":1:KILL"},
		{"between a merge and its checkpoint", runner.FaultItemMerged + ":2:KILL"},
		{"an agent committed in its own repository, the worktree not taken back", runner.FaultAgentCommitted + ":1:KILL"},
		{"the same, interrupted (SIGINT)", runner.FaultAgentCommitted + ":2:INT"},
		{"backoff sleep SIGKILL", runner.FaultBackoff + ":1:KILL"},
		{"backoff sleep SIGINT", runner.FaultBackoff + ":2:INT"},
		{"between a DLQ write and its checkpoint", runner.FaultDLQAdded + ":1:KILL"},
		{"after a reduce step's commit", runner.FaultReduceStepDone + ":1:KILL"},
		{"after the last reduce step (captures of earlier steps restored)", runner.FaultReduceStepDone + ":2:KILL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newCrashEnv(t, items, attempts, 1, "0")
			e.runFault(tc.fault, e.runArgs()...)
			// The job is listed and resumable whatever the moment was.
			if out := e.cli(0, "status", e.jobID, "--json"); !strings.Contains(out, `"job_id": "`+e.jobID+`"`) {
				t.Fatalf("status does not show the job:\n%s", out)
			}
			if code, _, errOut := runCLI(t, e.home, e.runArgs()...); code != 2 || !strings.Contains(errOut, "resume") {
				t.Errorf("run with the same id: exit %d, want 2 naming resume: %s", code, errOut)
			}
			e.cli(0, "resume", e.jobID)
			e.check(evens(items), odds(items), 1, false)
			// No agent's repository outlives the job (a worktree handed
			// out when the process died is removed by the resume).
			_ = filepath.WalkDir(filepath.Join(e.home, "worktrees"), func(p string, d os.DirEntry, err error) error {
				if err == nil && d.IsDir() && d.Name() == ".git" {
					t.Errorf("an agent's repository is left at %s", p)
				}
				return nil
			})
		})
	}
	for _, batch := range []string{"1000", "1"} { // one page; one record per page
		t.Run("between a redrive's merge and the record's removal, pages of "+batch, func(t *testing.T) {
			e := newCrashEnv(t, items, attempts, 1, "0")
			e.cli(0, e.runArgs()...)
			e.check(evens(items), odds(items), 1, false)
			if err := os.WriteFile(e.fixed, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			// One agent at a time: with two, the second item's merge can
			// complete while the first's goroutine is on its way from its
			// merge to the fault (seen once in CI under load), and then
			// both merged before the kill.
			e.runFault(runner.FaultItemMerged+":1:KILL", "dlq", "retry", e.jobID, "--batch-size", batch, "--parallel", "1")
			// Exactly one of the redriven items merged before the kill.
			log := gitOut(t, e.repo, "log", "--merges", "--format=%(trailers:key=Prodigy-Item,valueonly)", "prodigy/"+e.jobID)
			merged, other := itemID(1), itemID(3)
			if strings.Contains(log, strconv.Quote(other)) {
				merged, other = other, merged
			}
			if !strings.Contains(log, strconv.Quote(merged)) {
				t.Fatalf("no redriven item merged before the kill:\n%s", log)
			}
			dry := e.cli(0, "dlq", "retry", e.jobID, "--dry-run", "--json")
			if strings.Contains(dry, `"item_id": "`+merged+`"`) || !strings.Contains(dry, `"item_id": "`+other+`"`) {
				t.Errorf("dry run after the crash selects merged %s or misses %s:\n%s", merged, other, dry)
			}
			e.cli(0, "dlq", "retry", e.jobID, "--batch-size", batch)
			e.check(append(evens(items), odds(items)...), nil, 2, false)
		})
	}
}

// crashLoop is the kill count of a random-kill test (PRODIGY_CRASH_LOOP,
// else def) and its random source, seeded from the clock (the seed is
// logged to replay a failure).
func crashLoop(t *testing.T, def int) (int, *rand.Rand) {
	t.Helper()
	kills := def
	if s := os.Getenv("PRODIGY_CRASH_LOOP"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("PRODIGY_CRASH_LOOP=%q: %v", s, err)
		}
		kills = n
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	return kills, rand.New(rand.NewPCG(seed, seed>>1))
}

// TestRandomKillLoop kills the real CLI with SIGKILL at random moments,
// resuming after each kill, and checks the same invariants each time a job
// completes, then starts another job: PRODIGY_CRASH_LOOP kills in all
// (default 8, about 10 s), bounded by a minute. The DLQ history is checked
// exactly (check): every attempt that ran is one entry.
func TestRandomKillLoop(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns and kills processes")
	}
	kills, rng := crashLoop(t, 8)
	const items, attempts = 12, 2
	deadline := time.Now().Add(time.Minute)
	killed, jobs := 0, 0
	for killed < kills && time.Now().Before(deadline) {
		jobs++
		e := newCrashEnv(t, items, attempts, 3, "0.0$(( ${item.n} % 4 ))")
		checkpoint := jobstore.Paths{Home: e.home, Repo: "repo", JobID: e.jobID}.Checkpoint()
		started := func() bool { _, err := os.Stat(checkpoint); return err == nil }
		for killed < kills && time.Now().Before(deadline) {
			args := e.runArgs()
			if started() {
				args = []string{"resume", e.jobID}
			}
			cmd, stderr := e.spawn("", args...)
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			var finished bool
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("job %d: %v ended with %v:\n%s", jobs, args, err, stderr)
				}
				finished = true
			case <-time.After(time.Duration(rng.IntN(800)) * time.Millisecond):
				_ = cmd.Process.Signal(syscall.SIGKILL)
				<-done
				killed++
				time.Sleep(300 * time.Millisecond) // steps of the dead runner end
			}
			if finished {
				break
			}
		}
		if !started() {
			e.cli(0, e.runArgs()...)
		}
		e.cli(0, "resume", e.jobID)
		e.check(evens(items), odds(items), 1, true)
	}
	t.Logf("%d kill(s) over %d job(s)", killed, jobs)
}
