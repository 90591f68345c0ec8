package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/prodigy-action/prodigy-action/dlq"
)

func init() { registerDLQCommand("analyze", newDLQAnalyzeCommand) }

// dlqAnalysisJSON is what --export writes and --json prints.
type dlqAnalysisJSON struct {
	JobID string `json:"job_id"`
	Repo  string `json:"repo"`
	dlq.Analysis
}

func newDLQAnalyzeCommand(a *app) *cobra.Command {
	var (
		jobID, export string
		asJSON        bool
	)
	cmd := &cobra.Command{
		Use:   "analyze",
		Short: "Group failures by signature, error type and hour",
		Long: `Analyse a job's failures: pattern_groups (records sharing an error
signature, with up to three sample item ids), error_distribution (every failed
attempt by error type) and temporal_distribution (records per UTC hour of their
last attempt). Prints a summary on stdout, or writes the analysis as JSON to
FILE with --export (or prints it with --json).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cmd.Flags().Changed("export") && export == "" {
				return usageErr(errEmptyOutputPath)
			}
			store, ref, err := openDLQ(a, jobID)
			if err != nil {
				return err
			}
			defer store.Close()
			an, err := dlq.Analyze(store)
			if err != nil {
				return err
			}
			out := dlqAnalysisJSON{JobID: ref.JobID, Repo: ref.Repo, Analysis: an}
			switch {
			case export != "":
				if err := writeOutput(a, export, true, func(w io.Writer) error {
					b, err := json.MarshalIndent(out, "", "  ")
					if err != nil {
						return err
					}
					_, err = w.Write(append(b, '\n'))
					return err
				}); err != nil {
					return err
				}
				fmt.Fprintf(a.stderr, "wrote the analysis of %d items to %s\n", an.TotalItems, export)
				return nil
			case asJSON:
				return json.NewEncoder(a.stdout).Encode(out)
			}
			return printAnalysis(a.stdout, ref, an)
		},
	}
	f := cmd.Flags()
	f.StringVar(&jobID, "job-id", "", "job whose DLQ to analyse (optional when only one job has a DLQ)")
	f.StringVar(&export, "export", "", "write the analysis as JSON to FILE ('-' = stdout)")
	f.BoolVar(&asJSON, "json", false, "print the analysis as one JSON object on stdout")
	return cmd
}

func printAnalysis(w io.Writer, ref dlq.JobRef, an dlq.Analysis) error {
	fmt.Fprintf(w, "Job %s (repo %s): %d dead-lettered items\n", ref.JobID, ref.Repo, an.TotalItems)
	if an.TotalItems == 0 {
		return nil
	}
	fmt.Fprintln(w, "\nPattern groups (records sharing an error signature):")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  COUNT\tSIGNATURE\tLAST SEEN\tSAMPLE ITEMS")
	for _, g := range an.PatternGroups {
		samples := make([]string, len(g.SampleItems))
		for i, s := range g.SampleItems {
			samples[i] = cell(s)
		}
		fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\n", g.Count, cell(g.Signature), g.LastOccurrence.Format(time.RFC3339), strings.Join(samples, ", "))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "\nError distribution (every failed attempt):")
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, k := range sortedKeys(an.ErrorDistribution) {
		fmt.Fprintf(tw, "  %s\t%d\n", k, an.ErrorDistribution[k])
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "\nTemporal distribution (records per hour of last attempt, UTC):")
	for _, h := range an.TemporalDistribution {
		fmt.Fprintf(w, "  %s  %d\n", h.Hour.Format("2006-01-02T15:04Z"), h.Count)
	}
	return nil
}
