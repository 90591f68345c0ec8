package runner_test

import (
	"context"
	"maps"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/prodigy-action/prodigy-action/jobstore"
	"github.com/prodigy-action/prodigy-action/retry/retrytest"
	"github.com/prodigy-action/prodigy-action/runner"
)

// TestEngineRedrivesExplicitItems: a redrive of explicit items runs those
// items only, and SkipReduce leaves reduce to the next redrive — the two
// things a canary is made of (canary.go loops over such redrives).
func TestEngineRedrivesExplicitItems(t *testing.T) {
	c := newCanaryRepo(t)
	stderr := &syncBuffer{}
	eng := &runner.Engine{Home: c.Home, Stderr: stderr, Clock: retrytest.NewFakeClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)),
		Rand: func() float64 { return 0.5 }, Getenv: func(string) string { return "" }}
	if err := os.WriteFile(c.fixed, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	reduces := func() string {
		b, _ := os.ReadFile(c.reduces)
		return string(b)
	}
	before := reduces() // the first run's reduce
	ctx := context.Background()
	res, err := eng.Redrive(ctx, runner.RedriveSpec{JobID: "job-1", Items: []string{"b"}, SkipReduce: true, MaxRetries: 1})
	if err != nil || res.Successful != 1 {
		t.Fatalf("redrive b: %v %s\n%s", err, mustJSON(t, res), stderr)
	}
	if got := c.ran(); !slices.Equal(got, []string{"b"}) {
		t.Errorf("ran %v, want [b]", got)
	}
	if got := reduces(); got != before {
		t.Errorf("reduce ran with SkipReduce: %q, was %q", got, before)
	}
	c.truncateRuns()
	res, err = eng.Redrive(ctx, runner.RedriveSpec{JobID: "job-1", Items: []string{"a", "c"}, MaxRetries: 1})
	if err != nil || res.Successful != 3 { // the job's: b, then a and c
		t.Fatalf("redrive a, c: %v %s\n%s", err, mustJSON(t, res), stderr)
	}
	if got := c.ran(); !slices.Equal(got, []string{"a", "c"}) {
		t.Errorf("ran %v, want [a c]", got)
	}
	if got := reduces(); got != before+"reduce\n" {
		t.Errorf("reduces %q, want one more than %q", got, before)
	}
	if left := slices.Sorted(maps.Keys(c.DLQRecords("job-1"))); !slices.Equal(left, []string{"d", "e"}) {
		t.Errorf("DLQ left %v, want [d e]", left)
	}
}

// TestEngineRunTakesItsSpec: a run's spec (job id, branch, parallelism)
// reaches the job, and a resume of it through the same Engine reads the
// job from the Engine's state directory.
func TestEngineRunTakesItsSpec(t *testing.T) {
	r := newTestRepo(t, map[string]string{"items.json": `[{"n": 1}, {"n": 2}, {"n": 3}]`})
	wf := r.Workflow(`
name: spec
map:
  input: items.json
  max_parallel: 5
  agent_template:
    - shell: echo ${item.n} > out-${item.n}.txt && git add . && git commit -qm ${item.n}
`)
	stderr := &syncBuffer{}
	eng := &runner.Engine{Home: r.Home, Stderr: stderr, Clock: retrytest.NewFakeClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)),
		Getenv: func(string) string { return "" }}
	ctx := context.Background()
	res, err := eng.Run(ctx, runner.RunSpec{Workflow: wf, RepoDir: r.Dir, JobID: "spec-1", Branch: "results/spec", Agents: runner.Agents{MaxParallel: 2}})
	if err != nil || res.JobID != "spec-1" || res.ResultsBranch != "results/spec" || res.Successful != 3 {
		t.Fatalf("run: %v %s\n%s", err, mustJSON(t, res), stderr)
	}
	p, err := jobstore.FindJob(r.Home, "", "spec-1")
	if err != nil {
		t.Fatal(err)
	}
	cp, err := jobstore.LoadCheckpoint(p)
	if err != nil || cp.MaxParallel != 2 {
		t.Errorf("checkpoint max_parallel %d (%v), want 2 from the spec", cp.MaxParallel, err)
	}
	res, err = eng.Resume(ctx, runner.ResumeSpec{JobID: "spec-1"})
	if err != nil || res.JobID != "spec-1" || res.Successful != 3 {
		t.Errorf("resume: %v %s", err, mustJSON(t, res))
	}
}
