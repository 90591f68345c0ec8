package dlqcmd

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/prodigy-action/prodigy-action/cli/cmdutil"

	"github.com/prodigy-action/prodigy-action/dlq"
)

type dlqExportOptions struct {
	file, jobID, format string
	formatSet           bool
}

func NewDLQExportCmd(f *cmdutil.Factory) *cobra.Command {
	opts := &dlqExportOptions{}
	cmd := &cobra.Command{
		Use:   "export FILE",
		Short: "Write every dead-lettered item to FILE as JSON or CSV",
		Long: `Write the job's records to FILE ('-' = stdout): --format json (default) is
one JSON array of the full records; --format csv is one row per item with the
main fields (header: ` + strings.Join(dlq.CSVHeader, ",") + `),
quoted per RFC 4180. Without --format, a FILE ending in .csv selects csv.
The file is written to a temporary name and renamed when complete.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.file, opts.formatSet = args[0], cmd.Flags().Changed("format")
			return runDLQExport(f, opts)
		},
	}
	cmd.Flags().StringVar(&opts.format, "format", "json", "json or csv")
	cmdutil.JobIDFlag(cmd.Flags(), &opts.jobID, "job whose DLQ to export (default: the newest job of this repository)")
	return cmd
}

func runDLQExport(f *cmdutil.Factory, opts *dlqExportOptions) error {
	if opts.file == "" {
		return errEmptyOutputPath
	}
	format := strings.ToLower(opts.format)
	if !opts.formatSet && strings.EqualFold(filepath.Ext(opts.file), ".csv") {
		format = "csv"
	}
	export := map[string]func(io.Writer, dlq.Source) (int, error){"json": dlq.ExportJSON, "csv": dlq.ExportCSV}[format]
	if export == nil {
		return cmdutil.UsageErrorf("--format must be json or csv, got %q", opts.format)
	}
	var src dlq.Source
	store, ref, err := openDLQ(f, opts.jobID)
	switch {
	case isNoDLQ(err):
		fmt.Fprintln(f.ErrOut, err)
		src = dlq.Items(nil) // an empty export: [] or the CSV header
	case err != nil:
		return err
	default:
		defer store.Close()
		src = store
	}
	n := 0
	err = f.WriteOutput(opts.file, format == "json", func(w io.Writer) error {
		var err error
		if format == "csv" {
			n, err = dlq.ExportCSVLabeled(w, src, recordLabeler(ref))
		} else {
			n, err = export(w, src)
		}
		return err
	})
	if err != nil {
		return err
	}
	if ref.JobID == "" {
		fmt.Fprintf(f.ErrOut, "exported 0 items to %s\n", opts.file)
		return nil
	}
	fmt.Fprintf(f.ErrOut, "exported %d items of job %s to %s\n", n, ref.JobID, opts.file)
	return nil
}
