package dlqcmd

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/prodigy-action/prodigy-action/cli/cmdutil"

	"github.com/prodigy-action/prodigy-action/dlq"
	"github.com/prodigy-action/prodigy-action/report"
	"github.com/prodigy-action/prodigy-action/runner"
)

type dlqAnalyzeOptions struct {
	jobID, export string
	exportSet     bool
	json          bool
}

func NewDLQAnalyzeCmd(f *cmdutil.Factory) *cobra.Command {
	opts := &dlqAnalyzeOptions{}
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
			opts.exportSet = cmd.Flags().Changed("export")
			return runDLQAnalyze(f, opts)
		},
	}
	fs := cmd.Flags()
	cmdutil.JobIDFlag(fs, &opts.jobID, "job whose DLQ to analyse (default: the newest job of this repository)")
	fs.StringVar(&opts.export, "export", "", "write the analysis as JSON to FILE ('-' = stdout)")
	fs.BoolVar(&opts.json, "json", false, "print the analysis as one JSON object on stdout")
	return cmd
}

func runDLQAnalyze(f *cmdutil.Factory, opts *dlqAnalyzeOptions) error {
	if opts.exportSet && opts.export == "" {
		return errEmptyOutputPath
	}
	var src dlq.Source
	store, ref, err := openDLQ(f, opts.jobID)
	switch {
	case isNoDLQ(err):
		if opts.export == "" && !opts.json {
			fmt.Fprintln(f.ErrOut, err)
			return nil
		}
		src = dlq.Items(nil) // the analysis of no records
	case err != nil:
		return err
	default:
		defer store.Close()
		src = store
	}
	// What each cause cost: the items' spend from the job's checkpoint
	// (every attempt), when the job's state is here.
	var cost func(string) float64
	if home, herr := f.Home(); herr == nil && ref.JobID != "" {
		if res, serr := runner.Status(home, ref.JobID); serr == nil {
			byItem := make(map[string]float64, len(res.Items))
			for _, it := range res.Items {
				if it.CostUSD > 0 {
					byItem[it.ItemID] = it.CostUSD
				}
			}
			cost = func(id string) float64 { return byItem[id] }
		}
	}
	an, err := dlq.AnalyzeWithSpend(src, cost)
	if err != nil {
		return err
	}
	out := report.DLQAnalysis{JobID: ref.JobID, Repo: ref.Repo, Analysis: an}
	switch {
	case opts.export != "":
		err := f.WriteOutput(opts.export, true, func(w io.Writer) error {
			b, err := json.MarshalIndent(out, "", "  ")
			if err != nil {
				return err
			}
			_, err = w.Write(append(b, '\n'))
			return err
		})
		if err != nil {
			return err
		}
		fmt.Fprintf(f.ErrOut, "wrote the analysis of %d items to %s\n", an.TotalItems, opts.export)
		return nil
	case opts.json:
		return json.NewEncoder(f.Out).Encode(out)
	}
	return report.WriteDLQAnalysis(f.Out, ref, an)
}
