package jobstore

import (
	"fmt"
	"path/filepath"
	"strings"
)

// FindDLQJob picks the job a `dlq` command works on. With jobID set it is
// the job of that id with a DLQ under home/dlq (or, when it has none, the
// job of that id under state/, whose DLQ is then empty); without it, the
// only job that has a DLQ. No match wraps ErrNoJob; several jobs without
// an id, or one id in several repositories, wrap ErrAmbiguousJob. Their
// text lists the jobs there are (and does not repeat the sentinel's).
// Errors reading the state directory are returned as they are.
func FindDLQJob(home, jobID string) (Paths, error) {
	jobs, err := DLQJobs(home)
	if err != nil {
		return Paths{}, err
	}
	root := filepath.Join(home, "dlq")
	if jobID == "" {
		switch len(jobs) {
		case 0:
			return Paths{}, lookupErrorf(ErrNoJob, "no job has a dead letter queue under %s", root)
		case 1:
			return jobs[0], nil
		}
		return Paths{}, lookupErrorf(ErrAmbiguousJob, "%d jobs have a dead letter queue; choose one with --job-id:%s", len(jobs), jobList(jobs))
	}
	var match []Paths
	for _, j := range jobs {
		if j.JobID == jobID {
			match = append(match, j)
		}
	}
	if len(match) == 0 {
		all, err := StateJobs(home)
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
			return Paths{}, lookupErrorf(ErrNoJob, "no dead letter queue for job %q: no job has one under %s", jobID, root)
		}
		return Paths{}, lookupErrorf(ErrNoJob, "no dead letter queue for job %q; jobs with one:%s", jobID, jobList(jobs))
	case 1:
		return match[0], nil
	}
	return Paths{}, lookupErrorf(ErrAmbiguousJob, "job id %q exists in %d repositories:%s", jobID, len(match), jobList(match))
}

// jobList renders jobs one per line, indented, for an error's text.
func jobList(jobs []Paths) string {
	var b strings.Builder
	for _, j := range jobs {
		fmt.Fprintf(&b, "\n  %s (repo %s)", j.JobID, j.Repo)
	}
	return b.String()
}

// lookupError is a lookup failure whose text is its message alone while
// errors.Is still finds its kind (ErrNoJob, ErrAmbiguousJob, ErrNoLogs).
type lookupError struct {
	kind error
	msg  string
}

func (e *lookupError) Error() string { return e.msg }
func (e *lookupError) Unwrap() error { return e.kind }

func lookupErrorf(kind error, format string, args ...any) error {
	return &lookupError{kind: kind, msg: fmt.Sprintf(format, args...)}
}
