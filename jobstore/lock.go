package jobstore

import (
	"errors"
	"fmt"
	"os"

	"github.com/prodigy-action/prodigy-action/internal/fsx"
)

// ErrJobLocked is returned (wrapped) by LockJob when another process holds
// the job.
var ErrJobLocked = errors.New("in use by another process")

// LockJob takes an exclusive, non-blocking lock on the job so two processes
// never run, resume or redrive the same job at once. The lock dies with the
// process (kill -9 included). The returned function releases it.
func LockJob(p Paths) (unlock func() error, err error) {
	if err := os.MkdirAll(p.JobStateDir(), 0o755); err != nil {
		return nil, fmt.Errorf("create job state dir: %w", err)
	}
	l, err := fsx.TryLock(p.Lock())
	if errors.Is(err, fsx.ErrLocked) {
		return nil, fmt.Errorf("job %s is %w (lock %s)", p.JobID, ErrJobLocked, p.Lock())
	}
	if err != nil {
		return nil, fmt.Errorf("job %s: %w", p.JobID, err)
	}
	f := l.File()
	if err := f.Truncate(0); err == nil {
		_, _ = fmt.Fprintf(f, "%d\n", os.Getpid()) // informational only
	}
	return l.Unlock, nil
}

// Locked reports whether a live process holds the job lock. A lock that
// cannot even be probed counts as held: callers use false to say "the
// process is gone", which must not be claimed on doubt.
func Locked(p Paths) bool {
	if _, err := os.Stat(p.Lock()); err != nil {
		return false
	}
	l, err := fsx.TryLock(p.Lock())
	if err != nil {
		return true
	}
	_ = l.Unlock() // a probe: the lock was free either way
	return false
}
