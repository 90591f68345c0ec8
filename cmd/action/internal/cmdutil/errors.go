package cmdutil

import (
	"context"
	"errors"
	"fmt"

	"github.com/prodigy-action/prodigy-action/runner"
)

// Exit codes of the command line contract (DESIGN.md).
const (
	ExitOK          = 0
	ExitFailed      = 1
	ExitUsage       = 2
	ExitInterrupted = 130
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

// ExitCode is the one mapping from errors to the exit codes of the
// contract: usage, config and input errors (UsageError, runner.UsageError)
// 2; interrupts 130; every other failure 1 (a failed job, a corrupt DLQ
// record, a git error).
func ExitCode(err error) int {
	var ee *ExitError
	var ue *UsageError
	var rue *runner.UsageError
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &ee):
		return ee.Code
	case errors.As(err, &ue), errors.As(err, &rue):
		return ExitUsage
	case errors.Is(err, runner.ErrInterrupted), errors.Is(err, context.Canceled):
		return ExitInterrupted
	}
	return ExitFailed
}

// Silent reports whether err has nothing more to print.
func Silent(err error) bool {
	var ee *ExitError
	return errors.As(err, &ee) && ee.Err == nil
}
