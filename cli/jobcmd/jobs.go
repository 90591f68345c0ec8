package jobcmd

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/prodigy-action/prodigy-action/cli/cmdutil"
	"github.com/prodigy-action/prodigy-action/dlq"
	"github.com/prodigy-action/prodigy-action/jobstore"
	"github.com/prodigy-action/prodigy-action/report"
)

type jobsOptions struct {
	repo     string
	allRepos bool
	json     bool
}

// NewJobsCmd builds `jobs` (list) and `jobs discard`.
func NewJobsCmd(f *cmdutil.Factory) *cobra.Command {
	opts := &jobsOptions{}
	cmd := &cobra.Command{
		Use:   "jobs",
		Short: "List jobs (newest first) or discard one",
		Long: `List the jobs in the state directory, newest first: id, repository,
status, items done/failed/pending, DLQ records, age and results branch.
By default only the jobs of the repository containing --repo (default the
current directory) are listed; outside a git checkout, or with --all, every
job is. "latest" names the newest job of the current repository wherever a
job id is accepted.`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error { return runJobs(f, opts) },
	}
	fs := cmd.Flags()
	fs.StringVar(&opts.repo, "repo", "", "list the jobs of the git checkout containing this directory (default: the current directory)")
	fs.BoolVar(&opts.allRepos, "all", false, "list the jobs of every repository")
	fs.BoolVar(&opts.json, "json", false, "print one JSON object on stdout")
	cmd.AddCommand(NewDiscardCmd(f))
	return cmd
}

// JobsList is the --json output of `jobs`.
type JobsList struct {
	Repo string       `json:"repo"`
	Jobs []jobsRowOut `json:"jobs"`
}

type jobsRowOut struct {
	jobstore.JobSummary
	AgeSeconds int64 `json:"age_seconds"`
}

func runJobs(f *cmdutil.Factory, opts *jobsOptions) error {
	home, err := f.Home()
	if err != nil {
		return err
	}
	repo := ""
	if !opts.allRepos {
		dir := opts.repo
		if dir == "" {
			dir = "."
		}
		name, err := f.RepoName(home, dir)
		switch {
		case err == nil:
			repo = name
		case opts.repo != "":
			return cmdutil.UsageErrorf("--repo %s: %w", opts.repo, err)
		}
	}
	jobs, err := jobstore.ListJobs(home, repo)
	if err != nil {
		return err
	}
	for i := range jobs {
		jobs[i].DLQCount = dlqCount(jobstore.Paths{Home: home, Repo: jobs[i].Repo, JobID: jobs[i].JobID})
	}
	now := f.Now()
	if opts.json {
		out := JobsList{Repo: repo, Jobs: make([]jobsRowOut, 0, len(jobs))}
		for _, j := range jobs {
			out.Jobs = append(out.Jobs, jobsRowOut{JobSummary: j, AgeSeconds: int64(now.Sub(j.StartedAt).Seconds())})
		}
		return cmdutil.WriteJSON(f.Out, out)
	}
	if len(jobs) == 0 {
		where := home
		if repo != "" {
			where = fmt.Sprintf("%s for repository %s (--all lists every repository)", home, repo)
		}
		fmt.Fprintf(f.ErrOut, "no jobs in %s\n", where)
		return nil
	}
	return writeJobsTable(f.Out, jobs, now)
}

func writeJobsTable(w io.Writer, jobs []jobstore.JobSummary, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "JOB ID\tREPO\tSTATUS\tDONE/FAILED/PENDING\tDLQ\tAGE\tRESULTS BRANCH")
	for _, j := range jobs {
		status := string(j.Status)
		if j.Stale {
			status += " (process gone: resume it)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d/%d/%d\t%d\t%s\t%s\n", report.TermCell(j.JobID), report.TermCell(j.Repo), status,
			j.Done, j.Failed, j.Pending, j.DLQCount, age(now.Sub(j.StartedAt)), report.TermCell(j.ResultsBranch))
	}
	return tw.Flush()
}

// age renders a duration as 45s, 12m, 3h or 2d.
func age(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", max(int(d.Seconds()), 0))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

// dlqCount is the number of records in a job's DLQ store (0 when it cannot
// be read).
func dlqCount(p jobstore.Paths) int {
	store, err := dlq.Open(p.DLQRoot(), p.JobID, dlq.Options{})
	if err != nil {
		return 0
	}
	defer store.Close() // read only: nothing to flush
	n, err := store.Count()
	if err != nil {
		return 0
	}
	return n
}
