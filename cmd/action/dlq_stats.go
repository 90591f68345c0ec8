package main

import (
	"encoding/json"
	"fmt"
	"sort"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/prodigy-action/prodigy-action/dlq"
	"github.com/prodigy-action/prodigy-action/runner"
)

func init() { registerDLQCommand("stats", newDLQStatsCommand) }

// dlqStatsJSON is the --json output of `dlq stats`: the job, then the
// statistics keys of dlq.Statistics.
type dlqStatsJSON struct {
	JobID string `json:"job_id"`
	Repo  string `json:"repo"`
	dlq.Statistics
}

func newDLQStatsCommand(a *app) *cobra.Command {
	var (
		jobID  string
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "stats",
		Short: "Summarise a job's dead letter queue",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			store, ref, err := openDLQ(a, jobID)
			if err != nil {
				return err
			}
			defer store.Close()
			st, err := dlq.Stats(store)
			if err != nil {
				return err
			}
			if asJSON {
				return json.NewEncoder(a.stdout).Encode(dlqStatsJSON{JobID: ref.JobID, Repo: ref.Repo, Statistics: st})
			}
			return printStats(a, ref, st)
		},
	}
	f := cmd.Flags()
	f.StringVar(&jobID, "job-id", "", "job whose DLQ to summarise (optional when only one job has a DLQ)")
	f.BoolVar(&asJSON, "json", false, "print one JSON object on stdout")
	return cmd
}

func printStats(a *app, ref runner.Paths, st dlq.Statistics) error {
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "Job:\t%s (repo %s)\n", ref.JobID, ref.Repo)
	fmt.Fprintf(tw, "Total items:\t%d\n", st.TotalItems)
	fmt.Fprintf(tw, "Eligible for reprocess:\t%d\n", st.EligibleForReprocess)
	fmt.Fprintf(tw, "Requiring manual review:\t%d\n", st.RequiringManualReview)
	if st.OldestItem != nil {
		fmt.Fprintf(tw, "Oldest item (first attempt):\t%s\n", st.OldestItem.Format(time.RFC3339))
		fmt.Fprintf(tw, "Newest item (last attempt):\t%s\n", st.NewestItem.Format(time.RFC3339))
	}
	fmt.Fprintf(tw, "Average failure count:\t%.2f\n", st.AverageFailureCount)
	if err := tw.Flush(); err != nil {
		return err
	}
	printCounts(a, "By error type (newest failure):", st.ByErrorType)
	printCounts(a, "Error categories (by signature):", st.ErrorCategories)
	return nil
}

// printCounts prints a count map largest first, then by key.
func printCounts(a *app, title string, m map[string]int) {
	if len(m) == 0 {
		return
	}
	keys := sortedKeys(m)
	sort.SliceStable(keys, func(i, j int) bool { return m[keys[i]] > m[keys[j]] })
	fmt.Fprintln(a.stdout, title)
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	for _, k := range keys {
		fmt.Fprintf(tw, "  %d\t  %s\n", m[k], cell(k))
	}
	_ = tw.Flush()
}
