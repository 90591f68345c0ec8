package runner

import (
	"errors"
	"io/fs"

	"github.com/prodigy-action/prodigy-action/dlq"
	"github.com/prodigy-action/prodigy-action/jobstore"
)

// The state directory belongs to jobstore; the command layers use it
// directly. Paths names what the engine's API carries (Job.Paths).

// Paths is the on-disk layout of one job (jobstore.Paths).
type Paths = jobstore.Paths

// ValidJobID reports whether id is usable as a new job id.
func ValidJobID(id string) error { return jobstore.ValidJobID(id) }

// findJob locates a job by id (jobstore.FindJob): "" means the only job,
// jobstore.Latest the newest of repo ("" = any repository). A job that
// does not exist, an ambiguous or an invalid id is a *UsageError.
func findJob(home, repo, jobID string) (Paths, error) {
	p, err := jobstore.FindJob(home, repo, jobID)
	if errors.Is(err, jobstore.ErrNoJob) || errors.Is(err, jobstore.ErrAmbiguousJob) || errors.Is(err, jobstore.ErrInvalidJobID) {
		return p, usage(err)
	}
	return p, err
}

// Status reports a job's state from its checkpoint, every item included.
func Status(home, jobID string) (*Result, error) { return status(home, jobID, false) }

// StatusSummary is Status without Result.Items (nil): it reads the
// checkpoint's job fields and item counts only (jobstore.LoadSummary), so
// its cost does not grow with the number of items.
func StatusSummary(home, jobID string) (*Result, error) { return status(home, jobID, true) }

func status(home, jobID string, summary bool) (*Result, error) {
	p, err := findJob(home, "", jobID)
	if err != nil {
		return nil, err
	}
	var cp *jobstore.Checkpoint
	if summary {
		cp, err = jobstore.LoadSummary(p)
	} else {
		cp, err = jobstore.LoadCheckpoint(p)
	}
	if err != nil {
		return nil, err
	}
	res := resultOf(cp)
	if err := completeStatus(p, cp, res); err != nil {
		return nil, err
	}
	return res, nil
}

// completeStatus adds to a job's result what is not in its checkpoint:
// orphaned worktrees, the DLQ's size, and a dead process's note.
func completeStatus(p Paths, cp *jobstore.Checkpoint, res *Result) error {
	if f, err := jobstore.LoadOrphans(p.Orphans()); err == nil {
		res.OrphanedWorktrees = f.Worktrees
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if res.OrphanedWorktrees == nil {
		res.OrphanedWorktrees = []OrphanedWorktree{}
	}
	if n, err := countDLQ(p); err == nil {
		res.DLQCount = n
	}
	if cp.Status == StatusRunning && !jobstore.Locked(p) {
		res.Error = "the process running this job is gone; continue with `resume " + cp.JobID + "`"
	}
	return nil
}

// StatusStream is Status for a job of any size: head gets the result with
// Items nil, then item gets every item's outcome in input order, read one
// at a time (jobstore.StreamCheckpoint), so memory does not grow with the
// job and the first bytes come before the last item is read. The counts in
// head describe exactly the items that follow.
func StatusStream(home, jobID string, head func(*Result) error, item func(ItemOutcome) error) error {
	p, err := findJob(home, "", jobID)
	if err != nil {
		return err
	}
	return jobstore.StreamCheckpoint(p, func(cp *jobstore.Checkpoint) error {
		res := resultOf(cp) // counts only: cp has no items
		if err := completeStatus(p, cp, res); err != nil {
			return err
		}
		return head(res)
	}, func(it *jobstore.CheckpointItem) error { return item(it.ItemOutcome) })
}

// openDLQ opens the DLQ store of a job.
func openDLQ(p Paths, o dlq.Options) (*dlq.Store, error) {
	return dlq.Open(p.DLQRoot(), p.JobID, o)
}

func countDLQ(p Paths) (int, error) {
	store, err := openDLQ(p, dlq.Options{})
	if err != nil {
		return 0, err
	}
	defer store.Close() // read only: nothing to flush
	return store.Count()
}
