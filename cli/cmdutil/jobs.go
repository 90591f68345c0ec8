package cmdutil

import (
	"errors"

	"github.com/prodigy-action/prodigy-action/jobstore"
)

// FindJob locates a job by id (jobstore.FindJob): "" means the only job,
// jobstore.Latest the newest of repo ("" = any repository). A job that
// does not exist, an ambiguous or an invalid id is a *UsageError (exit 2);
// any other error (an unreadable state directory) is returned as it is.
func FindJob(home, repo, jobID string) (jobstore.Paths, error) {
	p, err := jobstore.FindJob(home, repo, jobID)
	if errors.Is(err, jobstore.ErrNoJob) || errors.Is(err, jobstore.ErrAmbiguousJob) || errors.Is(err, jobstore.ErrInvalidJobID) {
		return p, &UsageError{Err: err}
	}
	return p, err
}

// FindOrphans reads the orphan registries under home: one job's, or every
// job's when jobID is "". An invalid job id is a *UsageError.
func FindOrphans(home, jobID string) ([]jobstore.OrphanSet, error) {
	if jobID != "" {
		if err := jobstore.ValidJobID(jobID); err != nil {
			return nil, &UsageError{Err: err}
		}
	}
	return jobstore.FindOrphans(home, jobID)
}
