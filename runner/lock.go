package runner

import (
	"fmt"
	"os"
	"syscall"
)

// lockJob takes an exclusive, non-blocking lock on the job so two
// processes never run, resume or redrive the same job at once. The lock
// dies with the process (kill -9 included).
func lockJob(p Paths) (func(), error) {
	if err := os.MkdirAll(p.JobStateDir(), 0o755); err != nil {
		return nil, fmt.Errorf("create job state dir: %w", err)
	}
	f, err := os.OpenFile(p.Lock(), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open job lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("job %s is in use by another process (lock %s)", p.JobID, p.Lock())
	}
	fmt.Fprintf(f, "%d\n", os.Getpid())
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}
