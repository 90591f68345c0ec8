package runner

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/prodigy-action/prodigy-action/dlq"
)

// FindDLQJob picks the job a `dlq` command works on. With jobID set it is
// the job of that id with a DLQ under home/dlq (or, when it has none, the
// job of that id under state/, whose DLQ is then empty); without it, the
// only job that has a DLQ. No match, several jobs without an id, or one id
// in several repositories are *UsageError values that list the jobs there
// are.
func FindDLQJob(home, jobID string) (dlq.JobRef, error) {
	jobs, err := dlq.Jobs(home)
	if err != nil {
		return dlq.JobRef{}, err
	}
	root := filepath.Join(home, "dlq")
	if jobID == "" {
		switch len(jobs) {
		case 0:
			return dlq.JobRef{}, usage(fmt.Errorf("no job has a dead letter queue under %s", root))
		case 1:
			return jobs[0], nil
		}
		return dlq.JobRef{}, usage(fmt.Errorf("%d jobs have a dead letter queue; choose one with --job-id:%s", len(jobs), jobList(jobs)))
	}
	var match []dlq.JobRef
	for _, j := range jobs {
		if j.JobID == jobID {
			match = append(match, j)
		}
	}
	if len(match) == 0 {
		match = stateJobs(home, jobID)
	}
	switch len(match) {
	case 0:
		if len(jobs) == 0 {
			return dlq.JobRef{}, usage(fmt.Errorf("no dead letter queue for job %q: no job has one under %s", jobID, root))
		}
		return dlq.JobRef{}, usage(fmt.Errorf("no dead letter queue for job %q; jobs with one:%s", jobID, jobList(jobs)))
	case 1:
		return match[0], nil
	}
	return dlq.JobRef{}, usage(fmt.Errorf("job id %q exists in %d repositories:%s", jobID, len(match), jobList(match)))
}

// stateJobs finds jobs that ran (state/<repo>/jobs/<id>) but dead-lettered nothing.
func stateJobs(home, jobID string) []dlq.JobRef {
	if strings.ContainsAny(jobID, `/\`) || jobID == "." || jobID == ".." {
		return nil
	}
	dirs, _ := filepath.Glob(filepath.Join(home, "state", "*", "jobs", jobID))
	var refs []dlq.JobRef
	for _, d := range dirs {
		if fi, err := os.Stat(d); err != nil || !fi.IsDir() {
			continue
		}
		repo := filepath.Base(filepath.Dir(filepath.Dir(d)))
		refs = append(refs, dlq.JobRef{Repo: repo, JobID: jobID, Dir: dlq.JobDir(home, repo, jobID)})
	}
	return refs
}

func jobList(jobs []dlq.JobRef) string {
	var b strings.Builder
	for _, j := range jobs {
		fmt.Fprintf(&b, "\n  %s (repo %s)", j.JobID, j.Repo)
	}
	return b.String()
}
