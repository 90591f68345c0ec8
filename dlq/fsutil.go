package dlq

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// tmpPrefix starts every temporary file; item names never start with '.'.
const tmpPrefix = ".tmp-"

// writeFileAtomic writes data to dir/name through a temporary file in dir
// that is renamed over the target, so readers see the old or the new
// content, never a torn file. With durable the temporary file is fsynced
// before the rename.
func writeFileAtomic(dir, name string, data []byte, durable bool) (err error) {
	f, err := os.CreateTemp(dir, tmpPrefix+"*")
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
	if _, err = f.Write(data); err != nil {
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	if err = f.Chmod(0o644); err != nil {
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
	if err = os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		return fmt.Errorf("rename %s to %s: %w", tmp, name, err)
	}
	return nil
}

// lockFile is the job directory's lock file. Its content is the store
// generation and whether a writer is mid-operation: "<gen> clean|dirty\n".
type lockFile struct{ f *os.File }

const lockName = "dlq.lock"

func openLock(dir string) (*lockFile, error) {
	f, err := os.OpenFile(filepath.Join(dir, lockName), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open dlq lock: %w", err)
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("lock %s: %w", f.Name(), err)
	}
	return &lockFile{f: f}, nil
}

func (l *lockFile) release() {
	_ = syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
	_ = l.f.Close()
}

// state reads the generation and the dirty flag; an empty or unreadable
// lock file reads as generation 0, dirty (so the caller reconciles).
func (l *lockFile) state() (gen uint64, dirty bool) {
	buf := make([]byte, 64)
	n, _ := l.f.ReadAt(buf, 0)
	fields := strings.Fields(string(buf[:n]))
	if len(fields) != 2 {
		return 0, true
	}
	gen, err := strconv.ParseUint(fields[0], 10, 64)
	if err != nil {
		return 0, true
	}
	return gen, fields[1] != "clean"
}

// set records the generation and flag. Not fsynced: after a machine crash
// the first load of every store reconciles index.json with items/ anyway.
func (l *lockFile) set(gen uint64, dirty bool) error {
	flag := "clean"
	if dirty {
		flag = "dirty"
	}
	s := fmt.Sprintf("%020d %s\n", gen, flag)
	if _, err := l.f.WriteAt([]byte(s), 0); err != nil {
		return fmt.Errorf("write dlq lock state: %w", err)
	}
	return nil
}
