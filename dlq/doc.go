// Package dlq is the dead letter queue of prodigy-action: the record types of
// the seeds (DeadLetteredItem, FailureDetail, ErrorType, WorktreeArtifacts)
// with their exact JSON, the pure conversion from a failed agent to a record
// (spec 138), error classification and signatures, and a crash-safe file
// store with one JSON file per item id plus a derived index.json, kept in
// the seeds' layout under the job's DLQ root:
//
//	<root>/mapreduce/dlq/<job_id>/items/<item_file>.json
//	<root>/mapreduce/dlq/<job_id>/index.json
//
// The caller chooses the root (Open takes it; jobstore's Paths.DLQRoot is
// <home>/dlq/<repo>/<job_id>): dlq computes no state-directory path and
// imports no project package but the leaf internal/fsx (atomic writes and
// flock, shared with jobstore).
//
// Stats, Analyze, ExportJSON and ExportCSV stream records from any Source
// (a *Store, or Items for tests) without loading the whole queue.
//
// docs/dlq.md documents the on-disk format and every rule implemented here.
package dlq
