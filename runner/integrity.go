package runner

import (
	"context"
	"fmt"

	"github.com/prodigy-action/prodigy-action/jobstore"
	"github.com/prodigy-action/prodigy-action/runner/guard"
)

// The job's integrity check (the results branch and the repository's git
// configuration, as agents may change both) is package runner/guard; the
// job opens one and fails with what it finds.

// newGuard is the job's integrity check, opened with its checkpoint.
func (j *job) newGuard() *guard.Guard {
	return &guard.Guard{
		Git: j.git, State: j.state, JobID: j.id, Branch: j.branch, ParentDir: j.parentDir,
		Warn: j.warn, Unmerge: func(row *jobstore.CheckpointItem, why string) error { return unmerged(j.state, row, why) },
		Persisted: j.persisted,
	}
}

// resultsTip is the results branch's tip, or an error wrapping
// ErrJobFailed when it cannot be read.
func (j *job) resultsTip(ctx context.Context) (string, error) {
	tip, err := j.git.ResolveRef(ctx, "refs/heads/"+j.branch)
	if err != nil {
		return "", fmt.Errorf("%w: resolve the results branch: %w", ErrJobFailed, err)
	}
	return tip, nil
}

// markVerified records the results branch's current tip as verified
// (guard.Guard.MarkVerified).
func (j *job) markVerified(ctx context.Context) error {
	tip, err := j.resultsTip(ctx)
	if err != nil {
		return err
	}
	return j.guard.MarkVerified(tip)
}

// checkIntegrity runs the guard's check once the agents are done (before
// reduce, at the end): the verified tip, or an error wrapping ErrJobFailed
// and guard.ErrIntegrity, warned the first time it is found.
func (j *job) checkIntegrity(ctx context.Context) (string, error) {
	tip, fresh, err := j.guard.Check(ctx)
	if err != nil {
		err = fmt.Errorf("%w: %w", ErrJobFailed, err)
		if fresh {
			j.warn(err.Error())
		}
		return "", err
	}
	return tip, nil
}
