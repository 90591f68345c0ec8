package cmdutil

import (
	"errors"

	"github.com/prodigy-action/prodigy-action/gitops"
	"github.com/prodigy-action/prodigy-action/jobstore"
	"github.com/prodigy-action/prodigy-action/runner"
)

// FindJob locates a job by id (jobstore.FindJob): "" means the only job,
// jobstore.Latest the newest of repo ("" = any repository). A job that
// does not exist, an ambiguous or an invalid id is a *UsageError (exit 2);
// any other error (an unreadable state directory) is returned as it is.
func FindJob(home, repo, jobID string) (jobstore.Paths, error) {
	p, err := jobstore.FindJob(home, repo, jobID)
	return p, lookupUsage(err)
}

// FindDLQJob picks the job a `dlq` command works on (jobstore.FindDLQJob):
// no match, several jobs without an id, or one id in several repositories
// are a *UsageError (exit 2) listing the jobs there are; any other error
// is returned as it is.
func FindDLQJob(home, jobID string) (jobstore.Paths, error) {
	p, err := jobstore.FindDLQJob(home, jobID)
	return p, lookupUsage(err)
}

// lookupUsage makes jobstore's lookup errors (a job that does not exist,
// an ambiguous or an invalid id) usage errors.
func lookupUsage(err error) error {
	if errors.Is(err, jobstore.ErrNoJob) || errors.Is(err, jobstore.ErrAmbiguousJob) || errors.Is(err, jobstore.ErrInvalidJobID) {
		return &UsageError{Err: err}
	}
	return err
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

// OpenRepo opens the git checkout (or worktree) containing dir with the
// options of the engine's own git processes (Engine.Git: their
// environment and configuration, such as a safe.directory entry for a
// repository of another owner), for the commands that administer jobs
// outside the engine (jobs discard, worktree clean-orphaned, the state
// name of the repository).
func (f *Factory) OpenRepo(dir string) (*gitops.Client, error) {
	return f.Engine.OpenRepo(dir, runner.Agents{})
}

// RepoName is the state name (jobstore.RepoKey) under home of the git
// checkout containing dir; an error when dir is in none.
func (f *Factory) RepoName(home, dir string) (string, error) {
	git, err := f.OpenRepo(dir)
	if err != nil {
		return "", err
	}
	return jobstore.RepoKey(home, git.TopLevel(), ""), nil
}
