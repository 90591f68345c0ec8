package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/prodigy-action/prodigy-action/runner"
)

// finishJob prints the result (JSON on stdout with --json) and maps the
// runner's error to the exit code of the CLI contract.
func (a *app) finishJob(res *runner.Result, err error, asJSON bool) error {
	if asJSON && res != nil {
		if res.OrphanedWorktrees == nil {
			res.OrphanedWorktrees = []runner.OrphanedWorktree{}
		}
		if werr := writeJSON(a.stdout, res); werr != nil && err == nil {
			err = werr
		}
	}
	return exitFor(err)
}

// exitFor maps runner errors to exit codes.
func exitFor(err error) error {
	var ue *runner.UsageError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ue):
		return usageErr(err)
	case errors.Is(err, runner.ErrInterrupted):
		return &exitError{code: exitInterrupted, err: err}
	default:
		return &exitError{code: exitJobFailed, err: err}
	}
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("write JSON: %w", err)
	}
	return nil
}
