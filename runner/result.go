package runner

import "github.com/prodigy-action/prodigy-action/jobstore"

// JobStatus is the state a job ended (or currently is) in (defined by
// jobstore, which persists it).
type JobStatus = jobstore.JobStatus

// Job statuses reported by Run, Resume, RetryDLQ and Status.
const (
	StatusRunning     = jobstore.StatusRunning
	StatusCompleted   = jobstore.StatusCompleted
	StatusFailed      = jobstore.StatusFailed
	StatusInterrupted = jobstore.StatusInterrupted
)

// Result is the outcome of a job, printed by `--json` (one object, these
// keys) and consumed by the report and GitHub Action layers.
type Result struct {
	JobID  string    `json:"job_id"`
	Status JobStatus `json:"status"`
	// CostUSD is what the job's claude steps cost so far (all runs).
	CostUSD float64 `json:"cost_usd"`
	// MergedCostUSD is what the merged items cost (all their attempts,
	// failed ones included); FailedCostUSD what the items in the DLQ or
	// skipped cost (spend lost to failures); CostPerMergedUSD is CostUSD
	// over the merged items (what one useful result cost, everything
	// counted). Absent while zero.
	MergedCostUSD    float64 `json:"merged_cost_usd,omitempty"`
	FailedCostUSD    float64 `json:"failed_cost_usd,omitempty"`
	CostPerMergedUSD float64 `json:"cost_per_merged_usd,omitempty"`
	// ExecutionCostUSD is what this execution (run, resume, redrive, shard,
	// gather) spent: for a redrive, what recovering its items cost.
	ExecutionCostUSD float64 `json:"execution_cost_usd,omitempty"`
	// FleetCooldowns counts this execution's fleet-wide rate-limit
	// cool-downs.
	FleetCooldowns int `json:"fleet_cooldowns,omitempty"`
	// MaxCostUSD is the job budget this execution ran with (--max-cost-usd
	// or budget.max_cost_usd); 0 = none.
	MaxCostUSD        float64            `json:"max_cost_usd,omitempty"`
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
	// Items lists every item's final state in input order. A job of more
	// than KeptOutcomes items ends with Items nil and its outcomes read
	// from its checkpoint on demand (EachItem), so its end does not hold
	// a copy of every outcome: read them through EachItem.
	Items []ItemOutcome `json:"items"`
	// outcomes streams the items' outcomes when Items is not kept.
	outcomes func(fn func(ItemOutcome) error) error
	// TraceID is this execution's trace id when it was traced
	// (OTEL_EXPORTER_OTLP_* set); absent otherwise.
	TraceID string `json:"trace_id,omitempty"`
	// Canary is the plan of a `dlq retry --signature` redrive (which items
	// were the sample, which the rest); nil otherwise.
	Canary *CanaryPlan `json:"canary,omitempty"`
	// ResultsTip is the commit of the results branch the engine verified
	// when the job ended (package runner/guard): what may be published. Empty when
	// the branch could not be verified (see IntegrityError).
	ResultsTip string `json:"results_tip,omitempty"`
	// IntegrityError says why the results branch must not be published:
	// it was moved, rewound or deleted outside the engine, or the
	// repository's git configuration gained risky entries while agents ran.
	IntegrityError string `json:"integrity_error,omitempty"`
	// Storm is what tripped the failure-storm breaker in this execution
	// (error_policy.circuit_breaker): the shared error signature and the
	// items that showed it; nil when it did not trip.
	Storm *Storm `json:"storm,omitempty"`
	// Teardown deletes the pool worktrees this execution moved aside when
	// Engine.DeferTeardown was set; nil when there is nothing to delete.
	// Safe to call more than once.
	Teardown func() `json:"-"`
}

// ItemState is the final (or current) state of one work item.
type ItemState = jobstore.ItemState

// Item states. Every item ends in exactly one of merged, skipped or dlq;
// pending/running only exist while a job is unfinished.
const (
	ItemPending = jobstore.ItemPending
	ItemRunning = jobstore.ItemRunning
	ItemMerged  = jobstore.ItemMerged
	ItemSkipped = jobstore.ItemSkipped
	ItemDLQ     = jobstore.ItemDLQ
)

// ItemOutcome is one item's state in a Result.
type ItemOutcome = jobstore.ItemOutcome

// Timings is the per-item overhead split reported by benchmarks.
type Timings = jobstore.Timings

// OrphanedWorktree is a worktree cleanup could not remove (spec 136); it is
// persisted in orphaned_worktrees/<repo>/<job_id>.json.
type OrphanedWorktree = jobstore.OrphanedWorktree

// resultOf builds the public Result of a checkpoint. A summary checkpoint
// (jobstore.LoadSummary: ItemCounts set, no items) gives a Result whose
// Items is nil and whose cost is what the checkpoint last recorded.
func resultOf(c *jobstore.Checkpoint) *Result {
	if c.Items == nil && c.ItemCounts != nil {
		r := countedResult(c, *c.ItemCounts)
		r.Items = nil
		return r
	}
	r := resultFrom(c, c.Counts(), c.JobCost())
	for _, it := range c.Items {
		r.Items = append(r.Items, it.ItemOutcome)
	}
	return r
}

// KeptOutcomes is the largest job whose Result holds its items'
// outcomes in memory (Items); a larger job's are read by EachItem.
const KeptOutcomes = 10000

// keptOutcomes is KeptOutcomes (tests lower it).
var keptOutcomes = KeptOutcomes

// EachItem calls fn with every item's outcome, in input order, until fn
// returns an error (which it returns): from Items, or read from the
// job's checkpoint when Items is not kept. A summary (HasItems false)
// has none.
func (r *Result) EachItem(fn func(ItemOutcome) error) error {
	if r.Items == nil && r.outcomes != nil {
		return r.outcomes(fn)
	}
	for _, it := range r.Items {
		if err := fn(it); err != nil {
			return err
		}
	}
	return nil
}

// HasItems reports whether the result lists its items (Items, or read by
// EachItem); a summary (StatusSummary) does not.
func (r *Result) HasItems() bool { return r.Items != nil || r.outcomes != nil }

// streamedOutcomes reads the outcomes of the job at p from its checkpoint.
func streamedOutcomes(p jobstore.Paths) func(fn func(ItemOutcome) error) error {
	return func(fn func(ItemOutcome) error) error {
		return jobstore.StreamCheckpoint(p, func(*jobstore.Checkpoint) error { return nil },
			func(it *jobstore.CheckpointItem) error { return fn(it.ItemOutcome) })
	}
}

// stateResult builds the public Result of a job's state (at p) as
// resultOf does, reading its items one at a time (jobstore.State.Scan),
// or, for more than KeptOutcomes items unless keep, leaving them to
// EachItem; the cost is the one the state's counts keep. On a read error
// the Result has the counts and the items read so far.
func stateResult(s *jobstore.State, p jobstore.Paths, keep bool) (*Result, error) {
	var c jobstore.Checkpoint
	s.ReadHead(func(h *jobstore.CheckpointHead) { c.CheckpointHead = *h })
	n := s.Counts()
	r := countedResult(&c, n)
	if n.Total > keptOutcomes && !keep {
		r.Items, r.outcomes = nil, streamedOutcomes(p)
		return r, nil
	}
	r.Items = make([]ItemOutcome, 0, n.Total)
	err := s.Scan(func(_ int, it *jobstore.CheckpointItem) bool {
		r.Items = append(r.Items, it.ItemOutcome)
		return true
	})
	return r, err
}

// countedResult is the Result of c's head and its item counts n, without
// items (Items empty): the cost is the counts' items' plus the phases'.
func countedResult(c *jobstore.Checkpoint, n jobstore.Counts) *Result {
	return resultFrom(c, n, jobstore.RoundUSD(n.ItemsCostUSD+c.PhaseCostUSD))
}

func resultFrom(c *jobstore.Checkpoint, n jobstore.Counts, cost float64) *Result {
	r := &Result{
		JobID:         c.JobID,
		Status:        c.Status,
		CostUSD:       cost,
		MergedCostUSD: jobstore.RoundUSD(n.MergedCostUSD),
		FailedCostUSD: jobstore.RoundUSD(n.FailedCostUSD),
		MaxCostUSD:    c.BudgetUSD,
		Total:         n.Total,
		Successful:    n.Merged,
		Failed:        n.DLQ,
		Skipped:       n.Skipped,
		Pending:       n.Pending + n.Running,
		DLQCount:      n.DLQ,
		ResultsBranch: c.ResultsBranch,
		DurationMS:    c.ElapsedMS,
		Repo:          c.Repo,
		RepoDir:       c.RepoDir,
		WorkflowName:  c.WorkflowName,
		Error:         c.Error,
		Items:         make([]ItemOutcome, 0, len(c.Items)),
	}
	if n.Merged > 0 && cost > 0 {
		r.CostPerMergedUSD = jobstore.RoundUSD(cost / float64(n.Merged))
	}
	return r
}
