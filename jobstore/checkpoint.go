package jobstore

// What a checkpoint holds: the job's head (CheckpointHead) and its items,
// their states, outcomes, costs and counts.

import (
	"encoding/json"
	"math"
	"time"
)

// CheckpointFormat is bumped when the checkpoint layout changes incompatibly.
// Format 2 keeps item data in items.jsonl (CheckpointItem.DataOff/DataLen)
// instead of in each item; LoadCheckpoint still reads format 1 (data
// inline), which the next snapshot rewrites as format 2.
const CheckpointFormat = 2

// minFormat is the oldest checkpoint format LoadCheckpoint reads.
const minFormat = 1

// Phases of a job, as stored in the checkpoint.
const (
	PhaseSetup  = "setup"
	PhaseMap    = "map"
	PhaseReduce = "reduce"
	PhaseDone   = "done"
)

// JobStatus is the state a job ended (or currently is) in.
type JobStatus string

// Job statuses.
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
	// StatusBudgetExhausted: the job's spend budget could not cover the
	// next item; unstarted items stay pending (resume with a larger
	// budget).
	StatusBudgetExhausted JobStatus = "budget_exhausted"
	// StatusStoppedByBreaker: the failure-storm breaker stopped launching
	// (error_policy.circuit_breaker): items that failed with one error
	// signature are in the DLQ, the rest pending; resumable after a fix.
	StatusStoppedByBreaker JobStatus = "stopped_by_breaker"
)

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

// ItemOutcome is one item's state, as checkpointed and reported.
type ItemOutcome struct {
	ItemID string `json:"item_id"`
	// Label names the item for humans: its map.id_field value, else a
	// short rendering of its data (set when the item is loaded).
	Label    string    `json:"label,omitempty"`
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
	// CostUSD is what the item's claude steps cost (all attempts, all
	// runs of the job), as Claude Code reported it.
	CostUSD float64 `json:"cost_usd"`
	// Tokens are the tokens of those claude steps; nil when none ran.
	Tokens *Tokens `json:"tokens,omitempty"`
}

// Tokens counts the tokens of claude steps (Claude Code's modelUsage,
// or usage when that is absent).
type Tokens struct {
	Input         int64 `json:"input"`
	Output        int64 `json:"output"`
	CacheRead     int64 `json:"cache_read"`
	CacheCreation int64 `json:"cache_creation"`
}

// Add returns t plus u.
func (t Tokens) Add(u Tokens) Tokens {
	return Tokens{Input: t.Input + u.Input, Output: t.Output + u.Output, CacheRead: t.CacheRead + u.CacheRead, CacheCreation: t.CacheCreation + u.CacheCreation}
}

// Timings is the per-item overhead split reported by benchmarks.
type Timings struct {
	Prepare     float64 `json:"prepare"`
	Steps       float64 `json:"steps"`
	Merge       float64 `json:"merge"`
	Cleanup     float64 `json:"cleanup"`
	Bookkeeping float64 `json:"bookkeeping"`
}

// Checkpoint is the resumable state of a job: a snapshot written atomically
// to state/<repo>/jobs/<job_id>/checkpoint.json plus the item changes
// since, in checkpoint.journal (State, LoadCheckpoint). On disk it is one
// JSON object: the head's fields, then "items" — last by construction
// (State writes the head, then the items), which is what lets LoadSummary
// stop reading there.
type Checkpoint struct {
	CheckpointHead
	// Items are the job's work items in input order.
	Items []*CheckpointItem `json:"items"`
}

// CheckpointHead is everything a checkpoint holds but its items: the job's
// identity, settings, phase and counters (a summary, LoadSummary).
type CheckpointHead struct {
	FormatVersion     int    `json:"format_version"`
	CheckpointVersion int    `json:"checkpoint_version"`
	JobID             string `json:"job_id"`
	Repo              string `json:"repo"`
	RepoDir           string `json:"repo_dir"`
	WorkflowPath      string `json:"workflow_path"`
	WorkflowName      string `json:"workflow_name"`
	ResultsBranch     string `json:"results_branch"`
	BaseCommit        string `json:"base_commit"`
	ParentWorktree    string `json:"parent_worktree"`
	// Isolation and Merge are the engine's worktree and merge strategies.
	Isolation     string   `json:"isolation"`
	Merge         string   `json:"merge"`
	MaxParallel   int      `json:"max_parallel"`
	ClaudeCommand string   `json:"claude_command,omitempty"`
	ClaudeArgs    []string `json:"claude_args,omitempty"`
	// ClaudeOverrides are the caller's Claude Code options (config.ClaudeSettings
	// as JSON), reused by resume.
	ClaudeOverrides json.RawMessage `json:"claude_overrides,omitempty"`
	Sparse          []string        `json:"sparse,omitempty"` // --sparse of the first run; resume keeps it
	Status          JobStatus       `json:"status"`
	Phase           string          `json:"phase"`
	SetupCompleted  bool            `json:"setup_completed"`
	ReduceCompleted bool            `json:"reduce_completed"`
	Error           string          `json:"error,omitempty"`
	StartedAt       time.Time       `json:"started_at"`
	UpdatedAt       time.Time       `json:"updated_at"`
	// ElapsedMS accumulates the wall time of earlier runs (resume adds to it).
	ElapsedMS int64 `json:"elapsed_ms"`
	// NextAgent numbers agents uniquely across runs of the job.
	NextAgent int `json:"next_agent"`
	// CostUSD is the job's spend so far (JobCost): its items' cost_usd
	// plus PhaseCostUSD.
	CostUSD float64 `json:"cost_usd"`
	// PhaseCostUSD is what the claude steps of setup and reduce cost.
	PhaseCostUSD float64 `json:"phase_cost_usd,omitempty"`
	// MaxCostUSD is a job budget given with --max-cost-usd; it overrides
	// the workflow's budget.max_cost_usd for this and later runs.
	MaxCostUSD float64 `json:"max_cost_usd,omitempty"`
	// BudgetUSD is the job budget the latest run used (--max-cost-usd or
	// the workflow's budget.max_cost_usd), for reports; 0 = none.
	BudgetUSD float64 `json:"budget_usd,omitempty"`
	// Vars are values captured by setup steps, visible to map and reduce.
	Vars map[string]string `json:"vars"`
	// ReduceStepsDone counts the reduce steps that completed (in order);
	// after a crash only the steps after them run. A step killed mid-way
	// runs again from the start.
	ReduceStepsDone int `json:"reduce_steps_done,omitempty"`
	// ReduceStepHead is the results branch head when reduce step
	// ReduceStepsDone+1 started: a resume moves the branch back to it
	// before running that step again, so a step that committed and then
	// died does not find its work already committed.
	ReduceStepHead string `json:"reduce_step_head,omitempty"`
	// ReduceVars are values captured by completed reduce steps.
	ReduceVars map[string]string `json:"reduce_vars,omitempty"`
	// ResultsVerified is the last tip of the results branch the engine
	// verified or wrote itself outside the map phase (after setup, before
	// and after reduce): above it, the branch's first-parent chain may hold
	// only the items' merge commits (MergeCommit).
	ResultsVerified string `json:"results_verified,omitempty"`
	// ItemCounts tallies Items by state as of this snapshot (nil in
	// checkpoints of older versions), so a summary (LoadSummary) need not
	// read the items.
	ItemCounts *Counts `json:"item_counts,omitempty"`
}

// CheckpointItem is one work item with its current state.
type CheckpointItem struct {
	ItemOutcome
	Index int `json:"index"`
	// Data is the item's JSON value while it is only in memory (loaded
	// from a format 1 checkpoint, or added and not yet written). Every
	// snapshot moves it to the job's items.jsonl first and clears it: then
	// DataOff and DataLen locate it there (State.ItemData reads it).
	Data json.RawMessage `json:"data,omitempty"`
	// DataOff and DataLen locate the item's data in items.jsonl; DataLen
	// is 0 while the data is in Data.
	DataOff int64 `json:"data_off,omitempty"`
	DataLen int   `json:"data_len,omitempty"`
	// BudgetBase is the value of Attempts when the item's current attempt
	// budget began (0 for a run, the record's failure_count for a
	// redrive): Attempts-BudgetBase attempts of the budget are spent, also
	// across crashes and interrupts.
	BudgetBase int `json:"budget_base,omitempty"`
	// CostBase is the item's cost_usd when its current item budget began
	// (0 for a run, its cost so far for a redrive): CostUSD-CostBase of
	// item_max_cost_usd is spent.
	CostBase float64 `json:"cost_base,omitempty"`
	// Failures are the item's failed attempts that are not yet in a DLQ
	// record, one per attempt, persisted as each attempt ends (the runner
	// owns their encoding).
	Failures []json.RawMessage `json:"failures,omitempty"`
	// PendingRecord is the encoded DLQ record of a failed item while it is
	// not known to be stored: set before the DLQ write, cleared after it.
	// A dlq item that still has one is failed-unrecorded; resume writes it.
	PendingRecord json.RawMessage `json:"pending_dlq_record,omitempty"`
	// InFlight is the number of the attempt that started and has no
	// outcome yet (0: none), with the agent that runs it and when it
	// started. A resume that finds one (the process running the job died
	// during the attempt) records that attempt as a failure, so every
	// attempt that ran is one failure_history entry, and counts it in
	// Lost: a lost attempt is not the item's fault and does not spend its
	// budget (Attempts-BudgetBase-Lost attempts of it are spent).
	InFlight      int        `json:"attempt_in_flight,omitempty"`
	InFlightAgent string     `json:"agent_in_flight,omitempty"`
	InFlightSince *time.Time `json:"attempt_in_flight_since,omitempty"`
	Lost          int        `json:"attempts_lost,omitempty"`
	// SpendCeiling is, while the item runs with an item budget, its cost
	// if its whole reservation were spent (cost so far plus the
	// reservation). Cleared when the run of the item ends; a crash leaves
	// it, and the next run counts it as spent (RecoverSpend): spend that
	// Claude Code made before the crash is never forgotten.
	SpendCeiling float64 `json:"spend_ceiling_usd,omitempty"`
	// MergeCommit is the merge commit the engine made on the results
	// branch for a merged item; empty when it made none (no commits, or
	// the item's commit was already on the branch).
	MergeCommit string `json:"merge_commit,omitempty"`

	// pos is the item's index in Checkpoint.Items, kept by State.
	pos int
}

// Counts tallies the items of a checkpoint by state.
type Counts struct {
	Total   int `json:"total"`
	Merged  int `json:"merged"`
	Skipped int `json:"skipped"`
	DLQ     int `json:"dlq"`
	Pending int `json:"pending"`
	Running int `json:"running"`
	// Unrecorded counts the DLQ items whose record is not written yet.
	Unrecorded int `json:"unrecorded"`
	// ItemsCostUSD sums the items' cost_usd (round it with RoundUSD).
	ItemsCostUSD float64 `json:"items_cost_usd"`
	// MergedCostUSD sums the cost_usd of merged items (every attempt of
	// them, failed ones included): what the useful results cost.
	MergedCostUSD float64 `json:"merged_cost_usd,omitempty"`
	// FailedCostUSD sums the cost_usd of items in the DLQ or skipped:
	// spend lost to failures.
	FailedCostUSD float64 `json:"failed_cost_usd,omitempty"`
}

// add counts it (d = 1) or takes it out of the counts (d = -1), Total
// aside.
func (n *Counts) add(it *CheckpointItem, d int) {
	n.ItemsCostUSD += float64(d) * it.CostUSD
	switch it.State {
	case ItemMerged:
		n.Merged += d
		n.MergedCostUSD += float64(d) * it.CostUSD
	case ItemSkipped:
		n.Skipped += d
		n.FailedCostUSD += float64(d) * it.CostUSD
	case ItemDLQ:
		n.DLQ += d
		n.FailedCostUSD += float64(d) * it.CostUSD
		if it.PendingRecord != nil {
			n.Unrecorded += d
		}
	case ItemRunning:
		n.Running += d
	default:
		n.Pending += d
	}
}

// ItemsCost sums the items' cost_usd.
func (c *Checkpoint) ItemsCost() float64 {
	var sum float64
	for _, it := range c.Items {
		sum += it.CostUSD
	}
	return RoundUSD(sum)
}

// JobCost is the job's spend: its items' plus setup's and reduce's.
func (c *Checkpoint) JobCost() float64 { return RoundUSD(c.ItemsCost() + c.PhaseCostUSD) }

// RoundUSD rounds a dollar amount to a millionth of a dollar, so sums of
// reported costs do not show float noise.
func RoundUSD(v float64) float64 { return math.Round(v*1e6) / 1e6 }

// Counts tallies item states.
func (c *Checkpoint) Counts() Counts {
	var n Counts
	n.Total = len(c.Items)
	for _, it := range c.Items {
		n.add(it, 1)
	}
	return n
}

// RecoverSpend counts the reservation of an item whose run ended without
// clearing SpendCeiling (a crash) as spent; it reports whether it did.
func (it *CheckpointItem) RecoverSpend() bool {
	if it.SpendCeiling <= 0 {
		return false
	}
	if it.SpendCeiling > it.CostUSD {
		it.CostUSD = RoundUSD(it.SpendCeiling)
	}
	it.SpendCeiling = 0
	return true
}
