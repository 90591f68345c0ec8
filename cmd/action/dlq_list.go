package main

import (
	"encoding/json"
	"fmt"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/prodigy-action/prodigy-action/dlq"
)

func init() { registerDLQCommand("list", newDLQListCommand) }

// dlqListJSON is the --json output of `dlq list`.
type dlqListJSON struct {
	JobID string `json:"job_id"`
	Repo  string `json:"repo"`
	// Total is the number of records that matched (before --limit).
	Total int           `json:"total"`
	Items []dlq.Summary `json:"items"`
}

func newDLQListCommand(a *app) *cobra.Command {
	var (
		jobID            string
		eligible, asJSON bool
		limit            int
	)
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List dead-lettered items, newest last attempt first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if limit < 0 {
				return usageErrf("--limit must be 0 (no limit) or more, got %d", limit)
			}
			store, ref, err := openDLQ(a, jobID)
			if err != nil {
				return err
			}
			defer store.Close()
			rows, total, err := dlq.List(store, dlq.ListOptions{EligibleOnly: eligible, Limit: limit})
			if err != nil {
				return err
			}
			if asJSON {
				if rows == nil {
					rows = []dlq.Summary{}
				}
				return json.NewEncoder(a.stdout).Encode(dlqListJSON{JobID: ref.JobID, Repo: ref.Repo, Total: total, Items: rows})
			}
			if total == 0 {
				fmt.Fprintf(a.stderr, "no items in the dead letter queue of job %s\n", ref.JobID)
				return nil
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ITEM ID\tERROR TYPE\tFAILURES\tELIGIBLE\tLAST ATTEMPT\tSIGNATURE")
			for _, r := range rows {
				fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\n", cell(r.ItemID), r.ErrorType.Label(), r.FailureCount,
					yesNo(r.ReprocessEligible), r.LastAttempt.UTC().Format(time.RFC3339), cell(r.ErrorSignature))
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			if len(rows) < total {
				fmt.Fprintf(a.stderr, "showing %d of %d items (raise --limit, or --limit 0 for all)\n", len(rows), total)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&jobID, "job-id", "", "job whose DLQ to list (optional when only one job has a DLQ)")
	f.BoolVar(&eligible, "eligible", false, "only items eligible for `dlq retry`")
	f.IntVar(&limit, "limit", 50, "show at most N items; 0 shows all")
	f.BoolVar(&asJSON, "json", false, "print one JSON object on stdout")
	return cmd
}

func yesNo(b bool) string { return strconv.FormatBool(b) }
