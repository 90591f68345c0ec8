package runner

import (
	"errors"

	"github.com/prodigy-action/prodigy-action/runner/step"
)

// Sentinel errors callers map to exit codes.
var (
	// ErrJobFailed: setup or reduce failed, or a stop policy or failure
	// threshold halted the map phase (exit 1).
	ErrJobFailed = errors.New("job failed")
	// ErrInterrupted: the job was interrupted and checkpointed (exit 130).
	ErrInterrupted = errors.New("job interrupted")
)

// UsageError is a usage, config or input error: nothing was run and no
// state was left behind (exit 2).
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

func usage(err error) error { return &UsageError{Err: err} }

// Causes attached to contexts so a killed process can be classified
// (procsup.Result.Cause).
var (
	errAgentTimeout = step.ErrAgentTimeout
	errInterrupted  = step.ErrInterrupted
)
