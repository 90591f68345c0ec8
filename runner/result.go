package runner

import "time"

// JobStatus is the state a job ended (or currently is) in.
type JobStatus string

// Job statuses reported by Run, Resume, RetryDLQ and Status.
const (
	// StatusRunning: the job is in progress (or its process died; resume it).
	StatusRunning JobStatus = "running"
	// StatusCompleted: every item ended merged, skipped or dead-lettered and
	// reduce (if any) succeeded. Items in the DLQ do not fail a job.
	StatusCompleted JobStatus = "completed"
	// StatusFailed: setup or reduce failed, or a stop policy / failure
	// threshold halted the map phase. Pending items can be resumed.
	StatusFailed JobStatus = "failed"
	// StatusInterrupted: Ctrl-C or SIGTERM; the checkpoint is resumable.
	StatusInterrupted JobStatus = "interrupted"
)

// Result is the outcome of a job, printed by `--json` (one object, these
// keys) and consumed by the report and GitHub Action layers.
type Result struct {
	JobID             string             `json:"job_id"`
	Status            JobStatus          `json:"status"`
	Total             int                `json:"total"`
	Successful        int                `json:"successful"`
	Failed            int                `json:"failed"`
	Skipped           int                `json:"skipped"`
	Pending           int                `json:"pending"`
	DLQCount          int                `json:"dlq_count"`
	ResultsBranch     string             `json:"results_branch"`
	OrphanedWorktrees []OrphanedWorktree `json:"orphaned_worktrees"`
	DurationMS        int64              `json:"duration_ms"`
	// Repo is the repository directory name used in state paths.
	Repo string `json:"repo"`
	// RepoDir is the absolute path of the user's checkout.
	RepoDir string `json:"repo_dir"`
	// WorkflowName is the workflow's `name`.
	WorkflowName string `json:"workflow_name"`
	// Error says why the job failed or was interrupted; empty otherwise.
	Error string `json:"error,omitempty"`
	// Items lists every item's final state in input order.
	Items []ItemOutcome `json:"items"`
}

// ItemState is the final (or current) state of one work item.
type ItemState string

// Item states. Every item ends in exactly one of merged, skipped or dlq;
// pending/running only exist while a job is unfinished.
const (
	ItemPending ItemState = "pending"
	ItemRunning ItemState = "running"
	ItemMerged  ItemState = "merged"
	ItemSkipped ItemState = "skipped"
	ItemDLQ     ItemState = "dlq"
)

// ItemOutcome is one item's state in a Result.
type ItemOutcome struct {
	ItemID   string    `json:"item_id"`
	State    ItemState `json:"state"`
	Attempts int       `json:"attempts"`
	// Error is the last error for failed or skipped items.
	Error string `json:"error,omitempty"`
	// ErrorType is the DLQ error type name (e.g. "Timeout", "CommandFailed").
	ErrorType string `json:"error_type,omitempty"`
	// Commits is the number of agent commits merged for this item.
	Commits int `json:"commits"`
	// DurationMS is the wall time of all attempts.
	DurationMS int64 `json:"duration_ms"`
	// LogLocation is the last claude transcript of the item, if any.
	LogLocation string `json:"log_location,omitempty"`
	// TimingsMS splits the item's wall time (all attempts) into prepare
	// (worktree), steps, merge (commit listing, waiting for the merge lock,
	// the merge), cleanup and bookkeeping (the rest: events, checkpoint, DLQ,
	// backoff), in milliseconds.
	TimingsMS *Timings `json:"timings_ms,omitempty"`
}

// Timings is the per-item overhead split reported by benchmarks.
type Timings struct {
	Prepare     float64 `json:"prepare"`
	Steps       float64 `json:"steps"`
	Merge       float64 `json:"merge"`
	Cleanup     float64 `json:"cleanup"`
	Bookkeeping float64 `json:"bookkeeping"`
}

// OrphanedWorktree is a worktree cleanup could not remove (spec 136); it is
// persisted in orphaned_worktrees/<repo>/<job_id>.json.
type OrphanedWorktree struct {
	Path     string    `json:"path"`
	Branch   string    `json:"branch,omitempty"`
	AgentID  string    `json:"agent_id"`
	ItemID   string    `json:"item_id"`
	FailedAt time.Time `json:"failed_at"`
	Error    string    `json:"error"`
}
