// Package event is a job's event stream: the events the engine emits as a
// job runs (job, phase, agent, item, DLQ, worktree, breaker and fleet
// cool-down events, each a struct with its event_type) and the log that
// appends them to the job's events.jsonl, one EventRecord per line,
// redacted, never failing the job when it cannot be written. Their JSON
// is an on-disk format (README "State on disk").
package event
