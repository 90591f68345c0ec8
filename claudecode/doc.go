// Package claudecode is how prodigy-action invokes Claude Code and reads
// what it wrote: the command line of a claude step (Command), the final
// result event of its stream-json transcript (Result, FinalResult), the
// failure a run's exit code, result or permission denials stand for
// (ExitMessage, ReportedError, Denied), the size limits of a transcript as
// it is written (LimitTranscript), and the caller's Claude options as a
// checkpoint keeps them (EncodeOverrides, DecodeOverrides).
//
// It starts no process and keeps no state: the engine (runner) runs the
// command it builds, writes the transcript through the limiter, and turns a
// Failure into the step's failure. Failures are described in the DLQ's
// error types (dlq.ErrorType), as the engine records them.
package claudecode
