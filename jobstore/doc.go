// Package jobstore owns prodigy-action's state directory ($PRODIGY_HOME,
// default ~/.prodigy) except the DLQ records themselves:
//
//	state/<repo>/jobs/<job_id>/checkpoint.json   resumable job state: snapshot (State, LoadCheckpoint)
//	state/<repo>/jobs/<job_id>/checkpoint.journal item changes since the snapshot, one JSON line each
//	state/<repo>/jobs/<job_id>/items.jsonl       item values, written once (SpoolItem, ItemData)
//	state/<repo>/jobs/<job_id>/workflow.yml      workflow copy (SaveWorkflowCopy)
//	state/<repo>/jobs/<job_id>/job.lock          one process per job (LockJob, Locked)
//	sessions/session-<job_id>.json               session file of the seeds (SessionOf)
//	events/<repo>/<job_id>/events.jsonl          event log (OpenEvents)
//	worktrees/<repo>/<job_id>/…                  parent and agent worktrees
//	orphaned_worktrees/<repo>/<job_id>.json      worktrees cleanup could not remove (OpenOrphans)
//	logs/<repo>/<job_id>/<item>/attempt-<n>.log   an attempt's output (AttemptLog, CreateAttemptLog, ItemLogs)
//	logs/<repo>/<job_id>/<item>/attempt-<n>.jsonl claude transcripts (AttemptTranscript)
//	dlq/<repo>/<job_id>/                         the job's DLQ root, handed to dlq.Open
//
// Paths computes every location; Jobs, FindJob (including the id Latest),
// DLQJobs and FindDLQJob find jobs; ListJobs is the job catalogue;
// RemoveJob deletes one. Every JSON file is written atomically through
// internal/fsx (temporary file, fsync, rename).
//
// jobstore imports nothing from the project but internal/fsx. The engine
// (runner) writes the state; shard and the command layer (cli) import
// jobstore themselves to find, list and administer jobs.
package jobstore
