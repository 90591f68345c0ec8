// Package fsx holds the two file-system mechanisms every store of
// prodigy-action shares: atomic file replacement (temporary file in the same
// directory, optional fsync, rename) and flock(2) locks. It is a leaf: it
// imports nothing from the project, so both jobstore and dlq may use it.
package fsx

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// TempPrefix starts the name of every temporary file WriteFile creates, so
// a directory scan can recognise (and remove) the leftovers of a crashed
// writer. Names written through WriteFile should not start with it.
const TempPrefix = ".tmp-"

// WriteFile replaces path with data atomically: readers see the old or the
// new content, never a torn file. The data goes to a temporary file in the
// same directory (which must exist), is fsynced, gets mode perm and is
// renamed over path. On error the temporary file is removed.
func WriteFile(path string, data []byte, perm fs.FileMode) error {
	return write(path, data, perm, true)
}

// WriteFileNoSync is WriteFile without the fsync: the rename is still
// atomic, but after a machine crash the file may be empty. Use it only for
// derived data that is rebuilt from other files.
func WriteFileNoSync(path string, data []byte, perm fs.FileMode) error {
	return write(path, data, perm, false)
}

func write(path string, data []byte, perm fs.FileMode, durable bool) error {
	return stream(path, perm, durable, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// WriteStream is WriteFile for content that write produces into the
// temporary file (an export, say): path is replaced only when write
// succeeds. write's error is returned wrapped.
func WriteStream(path string, perm fs.FileMode, write func(io.Writer) error) error {
	return stream(path, perm, true, write)
}

func stream(path string, perm fs.FileMode, durable bool, write func(io.Writer) error) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, TempPrefix+"*")
	if err != nil {
		return fmt.Errorf("create temporary file in %s: %w", dir, err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(tmp)
		}
	}()
	if err = write(f); err != nil {
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	if err = f.Chmod(perm); err != nil {
		return fmt.Errorf("chmod %s: %w", tmp, err)
	}
	if durable {
		if err = f.Sync(); err != nil {
			return fmt.Errorf("fsync %s: %w", tmp, err)
		}
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", tmp, err)
	}
	if err = os.Rename(tmp, path); err != nil {
		return fmt.Errorf("rename %s to %s: %w", tmp, path, err)
	}
	return nil
}

// ErrLocked is returned (wrapped) by TryLock when another open file
// description holds the lock.
var ErrLocked = errors.New("locked by another process")

// Lock is an exclusive flock(2) lock on an open file. The kernel drops it
// when the process dies (kill -9 included). Locks taken through different
// Lock values exclude each other even inside one process.
type Lock struct{ f *os.File }

// LockFile opens (creating it with mode 0644) the file at path and waits
// for an exclusive lock on it.
func LockFile(path string) (*Lock, error) { return lock(path, true) }

// TryLock is LockFile without waiting: when the lock is held elsewhere it
// returns an error wrapping ErrLocked.
func TryLock(path string) (*Lock, error) { return lock(path, false) }

func lock(path string, wait bool) (*Lock, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open lock %s: %w", path, err)
	}
	how := syscall.LOCK_EX
	if !wait {
		how |= syscall.LOCK_NB
	}
	for {
		err = syscall.Flock(int(f.Fd()), how)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("lock %s: %w", path, ErrLocked)
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return &Lock{f: f}, nil
}

// File is the locked file; callers may read and write it while they hold
// the lock.
func (l *Lock) File() *os.File { return l.f }

// Unlock releases the lock and closes the file. Both steps run; their
// errors are joined.
func (l *Lock) Unlock() error {
	uerr := syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
	if uerr != nil {
		uerr = fmt.Errorf("unlock %s: %w", l.f.Name(), uerr)
	}
	cerr := l.f.Close()
	if cerr != nil {
		cerr = fmt.Errorf("close lock %s: %w", l.f.Name(), cerr)
	}
	return errors.Join(uerr, cerr)
}
