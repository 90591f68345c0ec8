package runner_test

import (
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/prodigy-action/prodigy-action/jobstore"
	"github.com/prodigy-action/prodigy-action/runner"
	"github.com/prodigy-action/prodigy-action/runner/runnertest"
)

// countWorkflow is runnertest.CountWorkflow.
const countWorkflow = runnertest.CountWorkflow

// TestTwoRepositoriesWithTheSameNameNeverShareJobs: two repositories both
// named "repo", one state directory, the same job id: each runs its own
// job (the second is not told the job exists), their state, DLQ and
// listings stay apart; the first keeps the bare directory name (where an
// earlier version kept its state, which so stays readable).
func TestTwoRepositoriesWithTheSameNameNeverShareJobs(t *testing.T) {
	a := newTestRepo(t, map[string]string{"items.json": `[1,2]`})
	b := newTestRepo(t, map[string]string{"items.json": `[1,2,3]`})
	b.Home = a.Home
	if filepath.Base(a.Dir) != filepath.Base(b.Dir) {
		t.Fatal("the fixture wants two directories of the same name")
	}
	for _, r := range []*testRepo{a, b} {
		wf := r.Workflow(countWorkflow)
		o, _, _, _ := r.options(wf)
		if _, err := runJob(context.Background(), o); err != nil {
			t.Fatalf("run in %s: %v", r.Dir, err)
		}
	}
	ka, kb := jobstore.RepoKey(a.Home, a.Dir, ""), jobstore.RepoKey(a.Home, b.Dir, "")
	if ka != "repo" || kb == ka || !strings.HasPrefix(kb, "repo-") {
		t.Fatalf("state names %q and %q, want repo (the first, kept) and repo-<digest>", ka, kb)
	}
	for _, c := range []struct {
		key   string
		r     *testRepo
		total int
	}{{ka, a, 2}, {kb, b, 3}} {
		jobs, err := jobstore.ListJobs(a.Home, c.key)
		if err != nil || len(jobs) != 1 || jobs[0].Total != c.total || jobs[0].RepoDir != c.r.Dir {
			t.Fatalf("jobs of %s = %+v, %v", c.r.Dir, jobs, err)
		}
		if got := c.r.Git("show", "prodigy/job-1:count.txt"); strings.TrimSpace(got) != strconv.Itoa(c.total) {
			t.Fatalf("%s reduced %s items", c.r.Dir, got)
		}
	}
	// Another run of the same id in the first repository is told the job
	// exists there (its old state is found under the bare name).
	wf := a.Workflow(countWorkflow)
	o, _, _, _ := a.options(wf)
	if _, err := runJob(context.Background(), o); runner.ExitCode(err) != 2 || !strings.Contains(err.Error(), "resume") {
		t.Fatalf("second run in the first repository = %v", err)
	}
}
