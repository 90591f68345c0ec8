package cmdutil

import (
	"errors"
	"fmt"

	"github.com/prodigy-action/prodigy-action/runner"
)

// Exit codes of the command line contract (DESIGN.md).
const (
	ExitOK          = runner.ExitOK
	ExitFailed      = runner.ExitFailed
	ExitUsage       = runner.ExitUsage
	ExitInterrupted = runner.ExitInterrupted
)

// UsageError marks a usage, config or input error: exit 2, nothing was run.
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// UsageErrorf formats a UsageError.
func UsageErrorf(format string, args ...any) error {
	return &UsageError{Err: fmt.Errorf(format, args...)}
}

// ExitError ends a command with Code after it reported what it had to say
// (Err nil: nothing more to print).
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit %d", e.Code)
	}
	return e.Err.Error()
}
func (e *ExitError) Unwrap() error { return e.Err }

// ExitCode is the CLI's mapping from errors to the exit codes of the
// contract: an ExitError's code; usage, config and input errors
// (UsageError) 2; otherwise runner.ExitCode, the mapping the Action uses
// too (runner.UsageError and an invalid workflow's validate.Error 2,
// interrupts 130, every other failure 1: a failed job, a corrupt DLQ
// record, a git error).
func ExitCode(err error) int {
	var ee *ExitError
	var ue *UsageError
	switch {
	case errors.As(err, &ee):
		return ee.Code
	case errors.As(err, &ue):
		return ExitUsage
	}
	return runner.ExitCode(err)
}

// Silent reports whether err has nothing more to print.
func Silent(err error) bool {
	var ee *ExitError
	return errors.As(err, &ee) && ee.Err == nil
}
