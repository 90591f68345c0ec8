package jobstore

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// RemoveJob deletes everything the store holds for a job: events, session,
// logs, DLQ, orphan registry and whatever is left under its worktree root,
// then — last, and only when all of that is gone — its state (checkpoint,
// workflow copy, lock), then the parent folders that became empty, up to
// Home. The state goes last because it is what names the job: a removal
// killed or failed half-way leaves the job listed, and removing it again
// finishes the work. Git's own records of the worktrees are the caller's
// business (remove the worktrees first). Missing files are fine; other
// failures are joined into the returned error.
func RemoveJob(p Paths) error {
	var errs []error
	dirs := []string{filepath.Dir(p.Events()), p.WorktreeRoot(), p.LogsDir(), p.DLQRoot()}
	for _, d := range dirs {
		if err := os.RemoveAll(d); err != nil {
			errs = append(errs, fmt.Errorf("remove %s: %w", d, err))
		}
	}
	for _, f := range []string{p.Session(), p.Orphans()} {
		if err := os.Remove(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("remove %s: %w", f, err))
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	if err := beforeStateRemoval(p); err != nil {
		return err
	}
	// The state folder leaves the jobs folder in one rename (no reader
	// sees a half-removed job), then is deleted; what a kill leaves in the
	// removal folder is deleted by the next RemoveJob.
	trash := filepath.Join(p.Home, "state", removingDir)
	_ = os.RemoveAll(trash)
	if err := os.MkdirAll(trash, 0o755); err != nil {
		return fmt.Errorf("remove %s: %w", p.JobStateDir(), err)
	}
	gone := filepath.Join(trash, SafeName(p.Repo)+"-"+p.JobID)
	if err := os.Rename(p.JobStateDir(), gone); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", p.JobStateDir(), err)
	}
	dirs = append(dirs, p.JobStateDir())
	if err := os.RemoveAll(trash); err != nil {
		errs = append(errs, fmt.Errorf("remove %s: %w", gone, err))
	}
	for _, d := range append(dirs, p.Session(), p.Orphans()) {
		removeEmptyParents(filepath.Dir(d), p.Home)
	}
	return errors.Join(errs...)
}

// beforeStateRemoval runs when everything but the job's state is removed
// (tests stop RemoveJob there, as a kill would).
var beforeStateRemoval = func(Paths) error { return nil }

// removingDir is the folder under Home/state a job's state is moved into
// to be deleted.
const removingDir = ".removing"

// removeEmptyParents removes dir and its parents while they are empty,
// stopping at stop (exclusive).
func removeEmptyParents(dir, stop string) {
	stop = filepath.Clean(stop)
	for dir != stop && strings.HasPrefix(dir, stop+string(filepath.Separator)) {
		if err := os.Remove(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return
		}
		dir = filepath.Dir(dir)
	}
}
