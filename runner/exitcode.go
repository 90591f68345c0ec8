package runner

import (
	"context"
	"errors"

	"github.com/prodigy-action/prodigy-action/validate"
)

// Exit codes of the command line contract (DESIGN.md), shared by the CLI
// and the GitHub Action.
const (
	ExitOK     = 0
	ExitFailed = 1
	ExitUsage  = 2
	// ExitStorm: the failure-storm breaker stopped the job (items pending,
	// resumable after the cause is fixed).
	ExitStorm       = 3
	ExitInterrupted = 130
)

// ExitCode maps an error of this package (Run, Resume, RetryDLQ, Status,
// …) or of validate (Result.Err) to its exit code: nil 0; a *UsageError or
// a *validate.Error (usage, config or input error: nothing was run) 2;
// ErrFailureStorm (the breaker stopped the job) 3; ErrInterrupted or a
// cancelled context 130; any other failure 1.
func ExitCode(err error) int {
	var ue *UsageError
	var ve *validate.Error
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &ue), errors.As(err, &ve):
		return ExitUsage
	case errors.Is(err, ErrInterrupted), errors.Is(err, context.Canceled):
		return ExitInterrupted
	case isStorm(err):
		return ExitStorm
	}
	return ExitFailed
}
