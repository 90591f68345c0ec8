package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/prodigy-action/prodigy-action/dlq"
	"github.com/prodigy-action/prodigy-action/runner"
)

func newDLQCmd(f *factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "dlq",
		Short: "Inspect, analyse, export and redrive the dead letter queue",
	}
	cmd.AddCommand(
		newDLQListCmd(f), newDLQInspectCmd(f), newDLQAnalyzeCmd(f), newDLQStatsCmd(f),
		newDLQExportCmd(f), newDLQRetryCmd(f), newDLQClearCmd(f), newDLQPurgeCmd(f),
	)
	return cmd
}

// openDLQ resolves the job (runner.FindDLQJob) and opens its store; store
// warnings go to stderr.
func (f *factory) openDLQ(jobID string) (*dlq.Store, dlq.JobRef, error) {
	home, err := f.home()
	if err != nil {
		return nil, dlq.JobRef{}, err
	}
	ref, err := runner.FindDLQJob(home, jobID)
	if err != nil {
		return nil, ref, err
	}
	s, err := dlq.Open(home, ref.Repo, ref.JobID, dlq.Options{Warn: func(m string) { fmt.Fprintf(f.errOut, "warning: %s\n", m) }})
	if err != nil {
		return nil, ref, &UsageError{Err: err}
	}
	return s, ref, nil
}

// confirm asks prompt on stderr and reads one answer line from stdin.
// "y" or "yes" (any case) confirms. Any other answer aborts with exit 1;
// no answer at all (EOF, e.g. stdin is not a terminal) is a usage error
// (exit 2) asking for the flag that skips the question. Nothing is changed
// in either case.
func (f *factory) confirm(prompt, skipFlag string) error {
	fmt.Fprintf(f.errOut, "%s [y/N] ", prompt)
	line, err := "", io.EOF
	if f.in != nil {
		line, err = bufio.NewReader(f.in).ReadString('\n')
	}
	if err != nil && line == "" {
		fmt.Fprintln(f.errOut)
		return usageErrorf("no confirmation on stdin; pass %s to run without asking", skipFlag)
	}
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return nil
	}
	fmt.Fprintln(f.errOut, "aborted: nothing was deleted")
	return &exitError{code: exitFailed}
}

// errEmptyOutputPath rejects an empty FILE argument (use "-" for stdout).
var errEmptyOutputPath = &UsageError{Err: errors.New(`output file must not be empty (use "-" for stdout)`)}

// writeOutput streams write into file ("-" = stdout) through a temporary
// file in the same directory, renamed into place only when complete.
func (f *factory) writeOutput(file string, write func(io.Writer) error) (err error) {
	if file == "-" {
		return write(f.out)
	}
	tmp, err := os.CreateTemp(filepath.Dir(file), "."+filepath.Base(file)+".tmp-*")
	if err != nil {
		return usageErrorf("cannot write %s: %w", file, err)
	}
	defer func() {
		if err != nil {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	if err = write(tmp); err != nil {
		return fmt.Errorf("write %s: %w", file, err)
	}
	if err = tmp.Chmod(0o644); err != nil {
		return fmt.Errorf("write %s: %w", file, err)
	}
	if err = tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", file, err)
	}
	if err = os.Rename(tmp.Name(), file); err != nil {
		return fmt.Errorf("write %s: %w", file, err)
	}
	return nil
}
