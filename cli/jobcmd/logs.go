package jobcmd

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/prodigy-action/prodigy-action/cli/cmdutil"
	"github.com/prodigy-action/prodigy-action/jobstore"
)

type logsOptions struct {
	jobID, itemID string
	attempt       int
	json          bool
}

// NewLogsCmd is `prodigy-action logs JOB ITEM [--attempt N]`: what an
// item's attempts printed (every step's stdout and stderr, redacted,
// bounded per attempt), whether the item succeeded or failed.
func NewLogsCmd(f *cmdutil.Factory) *cobra.Command {
	opts := &logsOptions{}
	cmd := &cobra.Command{
		Use:   "logs JOB_ID ITEM_ID",
		Short: "Print what an item's attempts printed (every step's output, kept per item)",
		Long: `Print the output an item's attempts wrote: every step's stdout and stderr,
shell and Claude, redacted, at most 1 MiB per attempt (the first and last
512 KiB when longer). JOB_ID may be "latest". Without --attempt every kept
attempt is printed in order, each after a "=== ... attempt N" line; a claude
step's stream-json transcript is named on stderr (attempt-N.jsonl beside
the log). --json lists the files instead.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.jobID, opts.itemID = args[0], args[1]
			return runLogs(f, opts)
		},
	}
	cmd.Flags().IntVar(&opts.attempt, "attempt", 0, "print only this attempt (1 = the first)")
	cmd.Flags().BoolVar(&opts.json, "json", false, "list the attempts' log files as JSON instead")
	return cmd
}

func runLogs(f *cmdutil.Factory, opts *logsOptions) error {
	if opts.attempt < 0 {
		return cmdutil.UsageErrorf("--attempt must be 1 or more")
	}
	p, err := f.Job(opts.jobID)
	if err != nil {
		return err
	}
	attempts, err := jobstore.ItemLogs(p, opts.itemID)
	if errors.Is(err, jobstore.ErrNoLogs) {
		return &cmdutil.UsageError{Err: err}
	}
	if err != nil {
		return err
	}
	if opts.attempt > 0 {
		var only []jobstore.AttemptLogs
		var have []string
		for _, a := range attempts {
			have = append(have, strconv.Itoa(a.Attempt))
			if a.Attempt == opts.attempt {
				only = append(only, a)
			}
		}
		if len(only) == 0 {
			return cmdutil.UsageErrorf("item %s of job %s has no attempt %d (kept: %v)", opts.itemID, p.JobID, opts.attempt, have)
		}
		attempts = only
	}
	if opts.json {
		return cmdutil.WriteJSON(f.Out, attempts)
	}
	for _, a := range attempts {
		if a.Log != "" {
			if err := copyFile(f.Out, a.Log); err != nil {
				return err
			}
		} else {
			fmt.Fprintf(f.Out, "=== %s attempt %d: no output log kept\n", opts.itemID, a.Attempt)
		}
		if a.Transcript != "" {
			fmt.Fprintf(f.ErrOut, "attempt %d's Claude transcript (stream-json): %s\n", a.Attempt, a.Transcript)
		}
	}
	return nil
}

func copyFile(w io.Writer, path string) error {
	fh, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	defer fh.Close()
	if _, err := io.Copy(w, fh); err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	return nil
}
