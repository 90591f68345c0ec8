// Package runner is prodigy-action's engine: it runs a MapReduce workflow
// as a job, setup → map → reduce.
//
// An Engine, built once from the long-lived dependencies (state directory,
// git options, clock, randomness, redactor, tracer, stderr, hooks, Claude
// command), has one method per operation, each taking a spec of what it
// reads: Run, Resume, Redrive. Operations built on the engine — the shard
// package's plan, shard and gather, one job across runners — drive a job
// through a Job handle (Engine.SetupJob, Engine.OpenJob): setup alone, a
// job of an explicit identity created or reopened, its items run,
// outcomes reached elsewhere imported, reduce, end.
//
// Engine.Run creates a job: a parent worktree on the results branch
// (prodigy/<job_id> by default; the user's checkout is never touched) where
// setup and reduce run. The map phase starts every pending item through an
// itemRunner, at most max_parallel at once (errgroup with SetLimit): the
// item's agent template runs in its own worktree (a reused pool slot or a
// fresh worktree) through a step.Runner (runner/step: shell via bash, claude without a
// shell, write_file), with step and agent timeouts that kill whole process
// groups, and is retried with the workflow's backoff (validate.RetryPolicy).
// A claude step runs the command line package claudecode builds and fails
// as claudecode reads its stream-json transcript. The agent's commits
// are merged into the results branch one merge at a time; a conflict fails
// the item with MergeConflict. The item runner works on the engine's item
// (item: named transitions of the checkpoint row jobstore persists) and
// gets what it uses of its job when it is built (itemDeps, an itemJob
// reporter); so do the job's other services (the worktree pool, package
// runner/worktree; the integrity guard, package runner/guard, which finds
// a results branch or git configuration an agent changed before anything
// is published; who agents run as, package runner/agentuser; the record of
// the job's step processes, package runner/procrecord; the progress line,
// package runner/progress). After the attempts are exhausted,
// on_item_failure decides: a DLQ record, a skip, a stop, or a custom
// handler. Cleanup failures are warnings and go to the orphan registry.
//
// Engine.Resume continues an interrupted or failed job (items already
// merged are recognised by their merge commits and never run twice);
// Engine.Redrive runs DLQ records again through the job's workflow, the
// records package runner/dlqselect selects, a page at a time (a canary
// redrive is a loop of redrives of explicit items). Status reads a
// job's state as a Result.
//
// A workflow is checked before anything runs by package validate (the
// command layers call it; Run repeats its interpolation check, and setup
// its check of the item fields the agent template reads as items load).
//
// The state directory belongs to jobstore (checkpoint, session, lock,
// orphan registry, event file, the job catalogue) and the DLQ records to
// dlq; runner writes through them. The command layers import jobstore
// themselves, and administer jobs outside a run there and beside their
// commands (discarding a job, cleaning orphaned worktrees, finding a DLQ's
// job); runner names only what its API carries (Paths, ItemOutcome, …).
// Every event is a struct (see Event); every side effect of the engine
// (clock, randomness, environment, stderr, hooks, redaction) is a field of
// the Engine.
//
// Errors: a *UsageError when nothing was run (exit 2), ErrJobFailed and
// ErrInterrupted (wrapped, with a Result) otherwise.
package runner
