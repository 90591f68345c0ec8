// Package shard spreads one job over many runners: plan, shard, gather
// (docs/shards.md), built on the engine's public API (runner.Engine and
// runner.Job).
//
// NewPlan runs a job's setup once, splits its items into shards and writes
// a plan directory (plan.json, base.bundle); Run runs one shard of a plan
// in any clone as a job of its own, with its part of the job-wide limits,
// and writes its output directory (shard.bundle, dlq/, events.jsonl,
// result.json) while it runs and at its end; Gather checks the outputs (an
// output is untrusted input), merges the shard branches into the job's
// results branch strictly in plan order, imports the items' outcomes and
// DLQ records, applies the workflow's failure policy to the whole job and
// runs reduce once. The results depend only on the outputs, not on their
// order or arrival; every step, killed at any moment, is completed by
// running it again.
//
// Errors are the engine's: a *runner.UsageError when nothing was run,
// runner.ErrJobFailed and runner.ErrInterrupted (wrapped, with a result)
// otherwise.
package shard
