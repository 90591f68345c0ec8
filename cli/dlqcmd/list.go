package dlqcmd

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/prodigy-action/prodigy-action/cli/cmdutil"

	"github.com/prodigy-action/prodigy-action/dlq"
	"github.com/prodigy-action/prodigy-action/report"
)

type dlqListOptions struct {
	jobID          string
	eligible, json bool
	limit          int
}

func NewDLQListCmd(f *cmdutil.Factory) *cobra.Command {
	opts := &dlqListOptions{}
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List dead-lettered items, newest last attempt first",
		Args:  cobra.NoArgs,
		RunE:  func(*cobra.Command, []string) error { return runDLQList(f, opts) },
	}
	fs := cmd.Flags()
	cmdutil.JobIDFlag(fs, &opts.jobID, "job whose DLQ to list (default: the newest job of this repository)")
	fs.BoolVar(&opts.eligible, "eligible", false, "only items eligible for `dlq retry`")
	fs.IntVar(&opts.limit, "limit", 50, "show at most N items; 0 shows all")
	fs.BoolVar(&opts.json, "json", false, "print one JSON object on stdout")
	return cmd
}

func runDLQList(f *cmdutil.Factory, opts *dlqListOptions) error {
	if opts.limit < 0 {
		return cmdutil.UsageErrorf("--limit must be 0 (no limit) or more, got %d", opts.limit)
	}
	store, ref, err := openDLQ(f, opts.jobID)
	if isNoDLQ(err) {
		if opts.json {
			return json.NewEncoder(f.Out).Encode(report.DLQList{Items: []dlq.Summary{}})
		}
		fmt.Fprintln(f.ErrOut, err)
		return nil
	}
	if err != nil {
		return err
	}
	defer store.Close()
	rows, total, err := dlq.List(store, dlq.ListOptions{EligibleOnly: opts.eligible, Limit: opts.limit, Label: recordLabeler(ref)})
	if err != nil {
		return err
	}
	if opts.json {
		if rows == nil {
			rows = []dlq.Summary{}
		}
		return json.NewEncoder(f.Out).Encode(report.DLQList{JobID: ref.JobID, Repo: ref.Repo, Total: total, Items: rows})
	}
	if total == 0 {
		fmt.Fprintf(f.ErrOut, "no records in the dead letter queue of job %s\n", ref.JobID)
		return nil
	}
	if err := report.WriteDLQTable(f.Out, rows); err != nil {
		return err
	}
	if len(rows) < total {
		fmt.Fprintf(f.ErrOut, "showing %d of %d items (raise --limit, or --limit 0 for all)\n", len(rows), total)
	}
	return nil
}
