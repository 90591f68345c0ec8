package dlqcmd

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/prodigy-action/prodigy-action/cli/cmdutil"
	"github.com/prodigy-action/prodigy-action/dlq"
	"github.com/prodigy-action/prodigy-action/jobstore"
	"github.com/prodigy-action/prodigy-action/runner"
)

func NewDLQCmd(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "dlq",
		Short: "Inspect, analyse, export and redrive the dead letter queue",
	}
	cmd.AddCommand(
		NewDLQListCmd(f), NewDLQInspectCmd(f), NewDLQAnalyzeCmd(f), NewDLQStatsCmd(f), NewDLQShowCmd(f),
		NewDLQExportCmd(f), NewDLQRetryCmd(f), NewDLQClearCmd(f), NewDLQPurgeCmd(f),
	)
	return cmd
}

// noDLQError is openDLQ's answer when no job id was given and no job has
// a dead letter queue: the listing commands print an empty listing ("no
// records") and exit 0, as for a job whose DLQ is empty (issue 29).
type noDLQError struct{ root string }

func (e *noDLQError) Error() string {
	return fmt.Sprintf("no records: no job has a dead letter queue under %s", e.root)
}

// isNoDLQ reports whether err is openDLQ's empty-store answer.
func isNoDLQ(err error) bool {
	var e *noDLQError
	return errors.As(err, &e)
}

// openDLQ resolves the job and opens its store; store warnings go to
// stderr. A job id (or "latest") names the job (cmdutil.FindDLQJob: an
// unknown one is a usage error, exit 2). Without one: no job with a DLQ is
// a *noDLQError (an empty listing, not an error); one job is that job;
// several are resolved to the newest job of the repository in the current
// directory (newestDLQJob), and stderr says which and how to choose
// another.
func openDLQ(f *cmdutil.Factory, jobID string) (*dlq.Store, jobstore.Paths, error) {
	home, err := f.Home()
	if err != nil {
		return nil, jobstore.Paths{}, err
	}
	var ref jobstore.Paths
	if jobID == "" {
		ref, err = newestDLQJob(f, home)
	} else {
		if jobID, err = f.ResolveJobID(jobID, ""); err != nil {
			return nil, jobstore.Paths{}, err
		}
		ref, err = cmdutil.FindDLQJob(home, jobID)
	}
	if err != nil {
		return nil, ref, err
	}
	s, err := dlq.Open(ref.DLQRoot(), ref.JobID, dlq.Options{Warn: func(m string) { fmt.Fprintf(f.ErrOut, "warning: %s\n", m) }})
	if err != nil {
		return nil, ref, &cmdutil.UsageError{Err: err}
	}
	return s, ref, nil
}

// newestDLQJob picks the job of a dlq command run without a job id: the
// only job with a DLQ, else the newest job (`latest`: latest started_at)
// of the repository in the current directory, else the newest job of any
// repository, else (no readable checkpoint) the DLQ whose index was
// written last. When it chose among several it says so on stderr.
func newestDLQJob(f *cmdutil.Factory, home string) (jobstore.Paths, error) {
	jobs, err := jobstore.DLQJobs(home)
	if err != nil {
		return jobstore.Paths{}, err
	}
	switch len(jobs) {
	case 0:
		return jobstore.Paths{}, &noDLQError{root: filepath.Join(home, "dlq")}
	case 1:
		return jobs[0], nil
	}
	var pick jobstore.Paths
	found := false
	if repo, err := f.RepoName(home, "."); err == nil {
		if p, err := cmdutil.FindJob(home, repo, jobstore.Latest); err == nil {
			pick, found = p, true
		}
	}
	if !found {
		if p, err := cmdutil.FindJob(home, "", jobstore.Latest); err == nil {
			pick, found = p, true
		}
	}
	if !found {
		var best int64
		for _, j := range jobs {
			st, err := os.Stat(filepath.Join(dlq.Dir(j.DLQRoot(), j.JobID), "index.json"))
			if err != nil {
				continue
			}
			if at := st.ModTime().UnixNano(); !found || at > best || at == best && j.JobID > pick.JobID {
				pick, best, found = j, at, true
			}
		}
	}
	if !found {
		pick = jobs[len(jobs)-1]
	}
	fmt.Fprintf(f.ErrOut, "job %s (repo %s): the newest of %d jobs with a dead letter queue (`latest`); choose another with --job-id ID:%s\n",
		pick.JobID, pick.Repo, len(jobs), jobList(jobs))
	return pick, nil
}

// jobList renders jobs one per line, indented.
func jobList(jobs []jobstore.Paths) string {
	s := ""
	for _, j := range jobs {
		s += fmt.Sprintf("\n  %s (repo %s)", j.JobID, j.Repo)
	}
	return s
}

// recordLabeler names a record's item as the job's workflow does
// (runner.Labeler): its id_field value, else a rendering of item_data.
func recordLabeler(ref jobstore.Paths) func(dlq.DeadLetteredItem) string {
	label := runner.Labeler(ref)
	return func(d dlq.DeadLetteredItem) string { return label(d.ItemID, d.ItemData) }
}

// errEmptyOutputPath rejects an empty FILE argument (use "-" for stdout).
var errEmptyOutputPath = cmdutil.UsageErrorf(`output file must not be empty (use "-" for stdout)`)
