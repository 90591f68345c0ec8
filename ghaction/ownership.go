package ghaction

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// RestoreOwnership gives every file, directory and symlink under root
// (root included) to uid:gid, without following symlinks. Entries that
// already have that owner are left alone, so a second call changes
// nothing. It visits everything it can and returns the joined errors of
// what it could not read or change; a missing root is not an error.
//
// It exists because GitHub runs container actions as root on a workspace
// owned by the runner user (uid 1001): whatever the container creates there
// (.git objects, refs, logs, worktrees) would otherwise be root-owned and
// later steps could not commit, delete branches, gc or remove it.
func RestoreOwnership(root string, uid, gid int) error {
	var errs []error
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			errs = append(errs, err)
			if d == nil || !d.IsDir() {
				return nil
			}
			// An unreadable directory: still fix its own owner below.
		}
		fi, err := os.Lstat(p)
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) { // removed meanwhile
				errs = append(errs, err)
			}
			return nil
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) == uid && int(st.Gid) == gid {
			return nil
		}
		if err := os.Lchown(p, uid, gid); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
		return nil
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return fmt.Errorf("restore the owner of %s to %d:%d: %w", root, uid, gid, errors.Join(errs...))
	}
	return nil
}

// Owner returns the uid and gid that own path (not following a symlink).
func Owner(path string) (uid, gid int, err error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return 0, 0, fmt.Errorf("stat %s: %w", path, err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, fmt.Errorf("stat %s: no owner information", path)
	}
	return int(st.Uid), int(st.Gid), nil
}

// RestoreRunnerOwnership is what the Action calls before it exits (also
// after a failure): when running as root, everything under each of dirs
// (the workspace and RUNNER_TEMP; "" entries are skipped) goes back to the
// owner of that directory itself. Problems are reported through warn and
// never fail the step. Not running as root, it does nothing: nothing the
// process created can belong to anyone else.
func RestoreRunnerOwnership(warn func(format string, args ...any), dirs ...string) {
	if os.Geteuid() != 0 {
		return
	}
	for _, dir := range dirs {
		if dir == "" {
			continue
		}
		uid, gid, err := Owner(dir)
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				warn("restore ownership: %s", err)
			}
			continue
		}
		if uid == 0 && gid == 0 {
			continue // a root-owned directory (e.g. under act): nothing to give back
		}
		if err := RestoreOwnership(dir, uid, gid); err != nil {
			warn("%s", err)
		}
	}
}
