// Package runner is prodigy-action's engine: it runs a MapReduce workflow
// as a job, setup → map → reduce.
//
// Run creates a job: a parent worktree on the results branch
// (prodigy/<job_id> by default; the user's checkout is never touched) where
// setup and reduce run. The map phase starts every pending item through an
// itemRunner, at most max_parallel at once (errgroup with SetLimit): the
// item's agent template runs in its own worktree (a reused pool slot or a
// fresh worktree) through a stepRunner (shell via bash, claude without a
// shell, write_file), with step and agent timeouts that kill whole process
// groups, and is retried with the workflow's backoff. The agent's commits
// are merged into the results branch one merge at a time; a conflict fails
// the item with MergeConflict. After the attempts are exhausted,
// on_item_failure decides: a DLQ record, a skip, a stop, or a custom
// handler. Cleanup failures are warnings and go to the orphan registry.
//
// Resume continues an interrupted or failed job (items already merged are
// recognised by their merge commits and never run twice); RetryDLQ
// redrives DLQ records through the job's workflow. Status reads a job's
// state; CleanOrphans removes orphaned worktrees.
//
// The state directory belongs to jobstore (checkpoint, session, lock,
// orphan registry, event file) and the DLQ records to dlq; runner writes
// through them and re-exports the types and lookups the command layers
// need (Paths, FindJob, Jobs, ItemOutcome, …), so those layers import
// runner only. Every event is a struct (see Event); every side effect of
// the engine (clock, randomness, environment, stderr, hooks, redaction) is
// an Option.
//
// Errors: a *UsageError when nothing was run (exit 2), ErrJobFailed and
// ErrInterrupted (wrapped, with a Result) otherwise.
package runner
