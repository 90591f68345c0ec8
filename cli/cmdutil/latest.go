package cmdutil

import (
	"github.com/prodigy-action/prodigy-action/jobstore"
)

// ResolveJobID turns the job id argument of a command into a job id:
// jobstore.Latest ("latest") becomes the newest job of the repository that
// contains repoDir ("" = the current directory), or of any repository when
// repoDir is not in a git checkout; any other id is returned as given.
func (f *Factory) ResolveJobID(jobID, repoDir string) (string, error) {
	if jobID != jobstore.Latest {
		return jobID, nil
	}
	home, err := f.Home()
	if err != nil {
		return "", err
	}
	if repoDir == "" {
		repoDir = "."
	}
	repo, err := f.RepoName(home, repoDir)
	if err != nil {
		repo = ""
	}
	p, err := FindJob(home, repo, jobstore.Latest)
	if err != nil {
		return "", err
	}
	return p.JobID, nil
}

// Job finds the job a command names: jobID, or the newest job of the
// checkout in the current directory for jobstore.Latest (ResolveJobID),
// under the state directory (FindJob: a job that does not exist is a
// *UsageError).
func (f *Factory) Job(jobID string) (jobstore.Paths, error) {
	home, err := f.Home()
	if err != nil {
		return jobstore.Paths{}, err
	}
	id, err := f.ResolveJobID(jobID, "")
	if err != nil {
		return jobstore.Paths{}, err
	}
	return FindJob(home, "", id)
}
