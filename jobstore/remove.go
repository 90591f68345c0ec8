package jobstore

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// RemoveJob deletes everything the store holds for a job: state (checkpoint,
// workflow copy, lock), events, session, logs, DLQ, orphan registry and
// whatever is left under its worktree root, then the parent folders that
// became empty, up to Home. Git's own records of the worktrees are the
// caller's business (remove the worktrees first). Missing files are fine;
// other failures are joined into the returned error.
func RemoveJob(p Paths) error {
	var errs []error
	dirs := []string{p.JobStateDir(), filepath.Dir(p.Events()), p.WorktreeRoot(), p.LogsDir(), p.DLQRoot()}
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
	for _, d := range append(dirs, p.Session(), p.Orphans()) {
		removeEmptyParents(filepath.Dir(d), p.Home)
	}
	return errors.Join(errs...)
}

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
