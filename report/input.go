package report

import "time"

// Input is everything the summary and the comment show.
type Input struct {
	// Title names the workflow (its `name`); "" means "prodigy-action".
	Title string
	// JobID is the engine's job id.
	JobID string
	// TraceID is the OpenTelemetry trace id of this execution when it was
	// traced (OTEL_EXPORTER_OTLP_* set); "" hides it.
	TraceID string
	// Status is the job status ("completed", "failed", "interrupted").
	Status string
	// Error says why the job failed, if it did.
	Error string
	// Command is "run" or "retry".
	Command string
	// Totals of the job.
	Total, Successful, Failed, Skipped, Pending, DLQCount int
	// CostUSD is what the job's claude steps cost (all runs); 0 hides it
	// unless MaxCostUSD is set.
	CostUSD float64
	// MaxCostUSD is the job budget; 0 = none.
	MaxCostUSD float64
	// MergedCostUSD and FailedCostUSD split CostUSD by the items' outcome
	// (merged: every attempt of the merged items; failed: the items in the
	// DLQ or skipped); CostPerMergedUSD is CostUSD over the merged items.
	MergedCostUSD, FailedCostUSD, CostPerMergedUSD float64
	// Storm is what tripped the failure-storm breaker; nil hides it.
	Storm *Storm
	// FleetCooldowns counts the fleet-wide rate-limit cool-downs.
	FleetCooldowns int
	// ResultsBranch is the branch holding the merged work; Pushed says
	// whether it was pushed to the remote.
	ResultsBranch string
	Pushed        bool
	// FailedItems are the items in the DLQ (one per item id).
	FailedItems []FailedItem
	// Patterns groups failures by error signature (dlq analyze).
	Patterns []PatternGroup
	// Orphaned lists worktrees cleanup could not remove.
	Orphaned []OrphanedWorktree
	// Artifact is the uploaded DLQ artifact; nil when none was uploaded.
	Artifact *Artifact
	// Redrive tells users how to re-run the failed items; nil hides it.
	Redrive *Redrive
	// RunURL links the workflow run (its summary page); "" hides the link.
	RunURL string
	// Notices are extra lines shown near the top (e.g. why the PR comment
	// could not be posted). They are escaped like item text.
	Notices []string
}

// Storm is a failure storm that stopped the job: Consecutive items in a
// row failed with Signature (Items: their ids) and the rest were not
// started; Continue is the command line that continues after the fix.
type Storm struct {
	Signature   string
	Items       []string
	Consecutive int
	Continue    string
}

// FailedItem is one dead-lettered item.
type FailedItem struct {
	ItemID string
	// ErrorType is the last failure's type name ("CommandFailed", "Timeout", …).
	ErrorType string
	// Signature is the record's error_signature.
	Signature string
	// Attempts is the record's failure_count (across runs for redriven items).
	Attempts int
	// LastError is the last failure's error_message.
	LastError string
	// LogLocation is the last json_log_location, if any.
	LogLocation string
	// ReprocessEligible mirrors the record; false items need --force / retry-force.
	ReprocessEligible bool
}

// PatternGroup is a group of failures sharing an error signature.
type PatternGroup struct {
	Signature string
	ErrorType string
	Count     int
	// Items are a few example item ids.
	Items []string
}

// OrphanedWorktree is a worktree the job could not clean up.
type OrphanedWorktree struct {
	Path   string
	Branch string
	ItemID string
	Error  string
}

// Artifact describes the uploaded DLQ artifact.
type Artifact struct {
	Name string
	ID   int64
	// URL is the artifact's download page; "" shows the name only.
	URL string
	// ExpiresAt is when it expires; zero means the repository default.
	ExpiresAt time.Time
}

// Redrive describes the redrive command for this run.
type Redrive struct {
	// Workflow is the file name of the redrive workflow (e.g. "redrive.yml").
	Workflow string
	// Ref is the branch to dispatch on; "" omits --ref.
	Ref string
	// Repo is owner/name; "" omits --repo.
	Repo string
	// RunID is this run's id, the value of retry-from-run.
	RunID int64
	// Force adds -f retry-force=true (shown when items are not eligible).
	Force bool
}
