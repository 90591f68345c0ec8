package jobstore_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/prodigy-action/prodigy-action/jobstore"
)

// TestFindDLQJob: a DLQ folder names the job; a job of that id without one
// is found under state/; no match and ambiguity are lookup errors (their
// sentinel found by errors.Is, not in their text) that list the jobs.
func TestFindDLQJob(t *testing.T) {
	home := t.TempDir()
	root := filepath.Join(home, "dlq")
	if _, err := jobstore.FindDLQJob(home, ""); !errors.Is(err, jobstore.ErrNoJob) || err.Error() != "no job has a dead letter queue under "+root {
		t.Errorf("no DLQ, no id: %v", err)
	}
	if _, err := jobstore.FindDLQJob(home, "x"); !errors.Is(err, jobstore.ErrNoJob) || err.Error() != `no dead letter queue for job "x": no job has one under `+root {
		t.Errorf("no DLQ, an id: %v", err)
	}
	for _, d := range []string{"r1/job-a", "r2/job-a", "r1/job-b"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	newJob(t, home, "r3", "state-only", t0)
	for _, c := range []struct {
		id, want string
		kind     error
	}{
		{"", "3 jobs have a dead letter queue; choose one with --job-id:\n  job-a (repo r1)\n  job-b (repo r1)\n  job-a (repo r2)", jobstore.ErrAmbiguousJob},
		{"job-a", "job id \"job-a\" exists in 2 repositories:\n  job-a (repo r1)\n  job-a (repo r2)", jobstore.ErrAmbiguousJob},
		{"nope", "no dead letter queue for job \"nope\"; jobs with one:\n  job-a (repo r1)\n  job-b (repo r1)\n  job-a (repo r2)", jobstore.ErrNoJob},
	} {
		if _, err := jobstore.FindDLQJob(home, c.id); !errors.Is(err, c.kind) || err.Error() != c.want {
			t.Errorf("FindDLQJob(%q) = %v, want %q (%v)", c.id, err, c.want, c.kind)
		}
	}
	for id, want := range map[string]string{"job-b": "r1", "state-only": "r3"} {
		if p, err := jobstore.FindDLQJob(home, id); err != nil || p.Repo != want || p.JobID != id {
			t.Errorf("FindDLQJob(%q) = %+v, %v, want repo %s", id, p, err, want)
		}
	}
}
