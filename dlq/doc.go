// Package dlq is the dead letter queue of prodigy-action: the record types of
// the seeds (DeadLetteredItem, FailureDetail, ErrorType, WorktreeArtifacts)
// with their exact JSON, the pure conversion from a failed agent to a record
// (spec 138), error classification and signatures, and a crash-safe file
// store with one JSON file per item id plus a derived index.json:
//
//	<home>/dlq/<repo>/<job_id>/mapreduce/dlq/<job_id>/items/<item_file>.json
//	<home>/dlq/<repo>/<job_id>/mapreduce/dlq/<job_id>/index.json
//
// Stats, Analyze, ExportJSON and ExportCSV stream records from any Source
// (a *Store, or Items for tests) without loading the whole queue.
//
// docs/dlq.md documents the on-disk format and every rule implemented here.
package dlq
