package runner

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/prodigy-action/prodigy-action/jobstore"
)

// FindDLQJob picks the job a `dlq` command works on. With jobID set it is
// the job of that id with a DLQ under home/dlq (or, when it has none, the
// job of that id under state/, whose DLQ is then empty); without it, the
// only job that has a DLQ. No match, several jobs without an id, or one id
// in several repositories are *UsageError values that list the jobs there
// are.
func FindDLQJob(home, jobID string) (Paths, error) {
	jobs, err := jobstore.DLQJobs(home)
	if err != nil {
		return Paths{}, err
	}
	root := filepath.Join(home, "dlq")
	if jobID == "" {
		switch len(jobs) {
		case 0:
			return Paths{}, usage(fmt.Errorf("no job has a dead letter queue under %s", root))
		case 1:
			return jobs[0], nil
		}
		return Paths{}, usage(fmt.Errorf("%d jobs have a dead letter queue; choose one with --job-id:%s", len(jobs), jobList(jobs)))
	}
	var match []Paths
	for _, j := range jobs {
		if j.JobID == jobID {
			match = append(match, j)
		}
	}
	if len(match) == 0 {
		all, err := jobstore.StateJobs(home)
		if err != nil {
			return Paths{}, err
		}
		for _, j := range all {
			if j.JobID == jobID {
				match = append(match, j)
			}
		}
	}
	switch len(match) {
	case 0:
		if len(jobs) == 0 {
			return Paths{}, usage(fmt.Errorf("no dead letter queue for job %q: no job has one under %s", jobID, root))
		}
		return Paths{}, usage(fmt.Errorf("no dead letter queue for job %q; jobs with one:%s", jobID, jobList(jobs)))
	case 1:
		return match[0], nil
	}
	return Paths{}, usage(fmt.Errorf("job id %q exists in %d repositories:%s", jobID, len(match), jobList(match)))
}

func jobList(jobs []Paths) string {
	var b strings.Builder
	for _, j := range jobs {
		fmt.Fprintf(&b, "\n  %s (repo %s)", j.JobID, j.Repo)
	}
	return b.String()
}
