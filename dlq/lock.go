package dlq

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/prodigy-action/prodigy-action/internal/fsx"
)

// tmpPrefix starts every temporary file; item names never start with '.'.
const tmpPrefix = fsx.TempPrefix

// lockFile is the job directory's lock file. Its content is the store
// generation and whether a writer is mid-operation: "<gen> clean|dirty\n".
type lockFile struct{ l *fsx.Lock }

const lockName = "dlq.lock"

func openLock(dir string) (*lockFile, error) {
	l, err := fsx.LockFile(filepath.Join(dir, lockName))
	if err != nil {
		return nil, fmt.Errorf("dlq lock: %w", err)
	}
	return &lockFile{l: l}, nil
}

func (l *lockFile) release() error { return l.l.Unlock() }

// state reads the generation and the dirty flag; an empty or unreadable
// lock file reads as generation 0, dirty (so the caller reconciles).
func (l *lockFile) state() (gen uint64, dirty bool) {
	buf := make([]byte, 64)
	n, _ := l.l.File().ReadAt(buf, 0)
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
	if _, err := l.l.File().WriteAt([]byte(s), 0); err != nil {
		return fmt.Errorf("write dlq lock state: %w", err)
	}
	return nil
}
