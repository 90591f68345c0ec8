package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/prodigy-action/prodigy-action/runner"
)

func init() { registerDLQCommand("retry", newDLQRetryCommand) }

func newDLQRetryCommand(a *app) *cobra.Command {
	var (
		filter             string
		maxRetries, par    int
		force, dry, asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "retry JOB_ID",
		Short: "Re-run DLQ items through the job's real workflow (redrive)",
		Long: `Re-run the job's DLQ records through its workflow: agent template, merge
into the job's results branch, cleanup, then reduce. Only reprocess-eligible
records run unless --force. --filter selects with an expression over item.*
(the record's fields and its item_data), e.g. 'item.priority >= 5',
'item.failure_count < 3', 'item.error_signature contains "Timeout"'.
Successes leave the DLQ; failures stay with their failure_history extended.
Interrupting is safe: records are removed only after success, so running
the command again continues.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if maxRetries < 0 || par < 0 {
				return usageErrf("--max-retries and --parallel must be positive")
			}
			opts, err := a.runOptions("", "")
			if err != nil {
				return err
			}
			res, err := runner.RetryDLQ(cmd.Context(), runner.RetryOptions{
				Home: opts.Home, JobID: args[0], Filter: filter, MaxRetries: maxRetries, Parallel: par,
				Force: force, DryRun: dry, Run: opts,
			})
			if dry && err == nil && !asJSON {
				fmt.Fprintf(a.stderr, "dry run: %d item(s) would be retried\n", len(res.Items))
				for _, it := range res.Items {
					fmt.Fprintf(a.stdout, "%s\n", it.ItemID)
				}
				return nil
			}
			return a.finishJob(res, err, asJSON)
		},
	}
	f := cmd.Flags()
	f.StringVar(&filter, "filter", "", "expression selecting records (over item.*)")
	f.IntVar(&maxRetries, "max-retries", 3, "attempts per item, with the workflow's backoff")
	f.IntVar(&par, "parallel", 10, "agents at once")
	f.BoolVar(&force, "force", false, "include records that are not reprocess_eligible")
	f.BoolVar(&dry, "dry-run", false, "list what would run; change nothing")
	f.BoolVar(&asJSON, "json", false, "print the result as one JSON object on stdout")
	return cmd
}
