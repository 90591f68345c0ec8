package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/prodigy-action/prodigy-action/dlq"
)

func init() { registerDLQCommand("export", newDLQExportCommand) }

func newDLQExportCommand(a *app) *cobra.Command {
	var jobID, format string
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
			file := args[0]
			if file == "" {
				return usageErr(errEmptyOutputPath)
			}
			if !cmd.Flags().Changed("format") && strings.EqualFold(filepath.Ext(file), ".csv") {
				format = "csv"
			}
			var export func(io.Writer, dlq.Source) (int, error)
			switch strings.ToLower(format) {
			case "json":
				export = dlq.ExportJSON
			case "csv":
				export = dlq.ExportCSV
			default:
				return usageErrf("--format must be json or csv, got %q", format)
			}
			store, ref, err := openDLQ(a, jobID)
			if err != nil {
				return err
			}
			defer store.Close()
			n := 0
			err = writeOutput(a, file, strings.EqualFold(format, "json"), func(w io.Writer) error {
				var err error
				n, err = export(w, store)
				return err
			})
			if err != nil {
				return err
			}
			fmt.Fprintf(a.stderr, "exported %d items of job %s to %s\n", n, ref.JobID, file)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&format, "format", "json", "json or csv")
	f.StringVar(&jobID, "job-id", "", "job whose DLQ to export (optional when only one job has a DLQ)")
	return cmd
}

// writeOutput streams write into file ("-" = stdout) through a temporary
// file in the same directory, renamed into place only when complete.
// Secrets are redacted on the way (as JSON when jsonText, else as text).
func writeOutput(a *app, file string, jsonText bool, write func(io.Writer) error) (err error) {
	if file == "-" {
		return write(a.stdout)
	}
	dir := filepath.Dir(file)
	f, err := os.CreateTemp(dir, "."+filepath.Base(file)+".tmp-*")
	if err != nil {
		return usageErrf("cannot write %s: %w", file, err)
	}
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(f.Name())
		}
	}()
	rw := a.redactor().Writer(f)
	if jsonText {
		rw = a.redactor().JSONLinesWriter(f)
	}
	if err = write(rw); err != nil {
		return fmt.Errorf("write %s: %w", file, err)
	}
	if err = rw.Flush(); err != nil {
		return fmt.Errorf("write %s: %w", file, err)
	}
	if err = f.Chmod(0o644); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", file, err)
	}
	if err = os.Rename(f.Name(), file); err != nil {
		return fmt.Errorf("write %s: %w", file, err)
	}
	return nil
}
