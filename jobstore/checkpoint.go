package jobstore

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prodigy-action/prodigy-action/internal/fsx"
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
// since, in checkpoint.journal (State, LoadCheckpoint).
type Checkpoint struct {
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
	// Items must stay the last field: LoadSummary stops reading there.
	Items []*CheckpointItem `json:"items"`
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

// State guards a job's checkpoint in memory and makes changes durable
// with group commit: callers change the state under the lock, then wait
// until a write that includes their change is on disk; concurrent callers
// share one write. Safe for concurrent use.
//
// The cost of an item's change does not grow with the job: UpdateItem
// appends the changed items (without their data) to checkpoint.journal,
// one JSON line each with the job's item counts, and fsyncs once per
// group. Update (job-level changes: phases, item lists, the final status)
// and compaction rewrite checkpoint.json whole and empty the journal;
// compaction happens when the journal outgrows the snapshot (at least
// 1 MiB), so its cost is amortised to O(1) per change. Item data never
// enters the journal or the snapshot: it is written once to items.jsonl
// (SpoolItem, or the next snapshot) and read back on demand (ItemData).
// The session file is rewritten by every Update and at most once per
// SessionInterval by UpdateItem.
type State struct {
	paths Paths
	now   func() time.Time
	// redact runs over the checkpoint, session and item JSON before writing.
	redact func([]byte) []byte

	mu      sync.Mutex
	cp      *Checkpoint
	counts  Counts           // cp.Counts(), kept current
	version uint64           // bumped by every change
	full    uint64           // last version that needs a snapshot
	dirty   map[int]struct{} // items changed since the last write
	spool   *spool           // items.jsonl, opened on first use

	flushMu      sync.Mutex
	flushed      uint64
	journalSize  int64
	snapshotSize int64
	sessionAt    time.Time
	wroteOnce    bool
}

// SessionInterval is the minimum time between two session file writes
// caused by item changes alone.
const SessionInterval = time.Second

// minCompact is the journal size below which it is never compacted.
const minCompact = 1 << 20

// NewState wraps cp; now stamps updated_at. Nothing is written until the
// first Update (which writes the snapshot).
func NewState(p Paths, cp *Checkpoint, now func() time.Time) *State {
	s := &State{paths: p, now: now, cp: cp, dirty: map[int]struct{}{}}
	s.reindex()
	return s
}

// reindex numbers the items and recounts them (O(items): only with a
// snapshot).
func (s *State) reindex() {
	for i, it := range s.cp.Items {
		it.pos = i
	}
	s.counts = s.cp.Counts()
}

// redactJSON passes one JSON document through the redactor, if any.
func (s *State) redactJSON(b []byte) []byte {
	if s.redact == nil {
		return b
	}
	return s.redact(b)
}

// RedactWith makes every later write pass the checkpoint, session and item
// JSON through fn (the job's redactor) first. Call it before the first
// Update.
func (s *State) RedactWith(fn func([]byte) []byte) { s.redact = fn }

// Update applies fn to the checkpoint and makes the change durable:
// checkpoint.json and the session file are rewritten atomically. Use it
// for job-level changes; UpdateItem for changes of one item.
func (s *State) Update(fn func(cp *Checkpoint)) error {
	s.mu.Lock()
	fn(s.cp)
	s.version++
	s.full = s.version
	v := s.version
	s.mu.Unlock()
	return s.flush(v)
}

// UpdateItem applies fn, which may change it (an item of the checkpoint)
// and cp.NextAgent, and makes the change durable by appending it to the
// journal. Other changes fn makes are only written by the next Update.
func (s *State) UpdateItem(it *CheckpointItem, fn func(cp *Checkpoint)) error {
	s.mu.Lock()
	i, ok := s.pos(it)
	if ok {
		s.counts.add(it, -1)
	}
	fn(s.cp)
	s.version++
	if ok {
		s.counts.add(it, 1)
		s.dirty[i] = struct{}{}
	} else {
		s.full = s.version
	}
	v := s.version
	s.mu.Unlock()
	return s.flush(v)
}

// UpdateItems applies fn, which may append items to cp.Items and change
// existing ones, calling touch(it) before it changes an existing item it;
// the change is made durable as journal entries (the appended items' data
// goes to items.jsonl first), so its cost is that of the items touched or
// appended, not of the checkpoint. Other changes fn makes are only written
// by the next Update.
func (s *State) UpdateItems(fn func(cp *Checkpoint, touch func(*CheckpointItem))) error {
	s.mu.Lock()
	n0 := len(s.cp.Items)
	var touched []*CheckpointItem
	seen := map[*CheckpointItem]bool{}
	fn(s.cp, func(it *CheckpointItem) {
		if i, ok := s.pos(it); ok && i < n0 && !seen[it] {
			seen[it] = true
			s.counts.add(it, -1)
			touched = append(touched, it)
			s.dirty[i] = struct{}{}
		}
	})
	s.version++
	for _, it := range touched {
		s.counts.add(it, 1)
	}
	for i := n0; i < len(s.cp.Items); i++ {
		it := s.cp.Items[i]
		it.pos = i
		s.counts.add(it, 1)
		s.counts.Total++
		if err := s.spoolLocked(it); err != nil {
			s.full = s.version // the snapshot spools it again
		}
		s.dirty[i] = struct{}{}
	}
	v := s.version
	s.mu.Unlock()
	return s.flush(v)
}

// pos is it's index in the checkpoint, if it is one of its items.
func (s *State) pos(it *CheckpointItem) (int, bool) {
	i := it.pos
	if i >= 0 && i < len(s.cp.Items) && s.cp.Items[i] == it {
		return i, true
	}
	return 0, false
}

// Read runs fn with the checkpoint locked; fn must not keep references.
func (s *State) Read(fn func(cp *Checkpoint)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fn(s.cp)
}

// Counts tallies the items by state in O(1): the counts are kept current
// by UpdateItem and recounted by Update.
func (s *State) Counts() Counts {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counts
}

// SpoolItem writes it.Data (redacted) to the job's items.jsonl and
// replaces it with a reference (DataOff, DataLen), so a job's item data is
// not held in memory. Use it for items not yet in the checkpoint (while
// loading them); an Update then adds them. The data is made durable before
// the next snapshot is written. An item without Data is left alone.
func (s *State) SpoolItem(it *CheckpointItem) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.spoolLocked(it)
}

func (s *State) spoolLocked(it *CheckpointItem) error {
	if it.Data == nil {
		return nil
	}
	if s.spool == nil {
		sp, err := openSpool(s.paths.ItemData())
		if err != nil {
			return err
		}
		s.spool = sp
	}
	off, n, err := s.spool.add(s.redactJSON(it.Data))
	if err != nil {
		return fmt.Errorf("write item data: %w", err)
	}
	it.Data, it.DataOff, it.DataLen = nil, off, n
	return nil
}

// ItemData returns the JSON value of it, an item of the checkpoint: its
// Data, or its line of items.jsonl. As stored, the data is redacted.
func (s *State) ItemData(it *CheckpointItem) (json.RawMessage, error) {
	s.mu.Lock()
	data, off, n := it.Data, it.DataOff, it.DataLen
	if data != nil || n == 0 {
		s.mu.Unlock()
		return data, nil
	}
	if s.spool == nil {
		sp, err := openSpool(s.paths.ItemData())
		if err != nil {
			s.mu.Unlock()
			return nil, err
		}
		s.spool = sp
	}
	sp := s.spool
	err := sp.flushFor(off + int64(n))
	s.mu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("read the data of item %s: %w", it.ItemID, err)
	}
	return sp.read(off, n, it.ItemID)
}

// Close releases the items file; the State must not be used afterwards.
func (s *State) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.spool == nil {
		return nil
	}
	err := s.spool.close()
	s.spool = nil
	return err
}

// journalEntry is one line of checkpoint.journal: item Pos of the
// checkpoint (without its data) as of version V, and the job's item
// counts after the change.
type journalEntry struct {
	V         int             `json:"v"`
	UpdatedAt time.Time       `json:"updated_at"`
	NextAgent int             `json:"next_agent"`
	Pos       int             `json:"pos"`
	Counts    *Counts         `json:"counts,omitempty"`
	Item      *CheckpointItem `json:"item"`
}

func (s *State) flush(v uint64) error {
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	if s.flushed >= v {
		return nil
	}
	s.mu.Lock()
	snap := s.version
	s.cp.CheckpointVersion++
	s.cp.UpdatedAt = s.now().UTC()
	if !s.wroteOnce || s.full > s.flushed || s.journalSize > max(s.snapshotSize, minCompact) {
		err := s.writeSnapshotLocked()
		if err == nil {
			s.flushed = snap
		}
		return err
	}
	if s.spool != nil {
		// Journal entries may point into data spooled since the snapshot.
		if err := s.spool.sync(); err != nil {
			s.full = s.version
			s.mu.Unlock()
			return fmt.Errorf("write item data: %w", err)
		}
	}
	var buf []byte
	counts := s.counts
	// In position order: appended items are replayed in order.
	order := make([]int, 0, len(s.dirty))
	for i := range s.dirty {
		order = append(order, i)
	}
	slices.Sort(order)
	for _, i := range order {
		it := *s.cp.Items[i]
		it.Data = nil
		line, err := json.Marshal(journalEntry{V: s.cp.CheckpointVersion, UpdatedAt: s.cp.UpdatedAt, NextAgent: s.cp.NextAgent, Pos: i, Counts: &counts, Item: &it})
		if err != nil {
			s.mu.Unlock()
			return fmt.Errorf("encode checkpoint journal: %w", err)
		}
		buf = append(append(buf, s.redactJSON(line)...), '\n')
	}
	clear(s.dirty)
	var sess *Session
	if now := s.now(); now.Sub(s.sessionAt) >= SessionInterval || now.Before(s.sessionAt) {
		sess = sessionOf(s.cp, counts)
		s.sessionAt = now
	}
	s.mu.Unlock()
	if err := appendSync(s.paths.CheckpointJournal(), buf); err != nil {
		// The journal may now end in a torn line or miss this version:
		// the next write is a whole snapshot, which supersedes it.
		s.mu.Lock()
		s.full = s.version
		s.mu.Unlock()
		return fmt.Errorf("write checkpoint journal: %w", err)
	}
	s.journalSize += int64(len(buf))
	if sess != nil {
		data, err := json.MarshalIndent(sess, "", "  ")
		if err == nil {
			err = writeFile(s.paths.Session(), append(s.redactJSON(data), '\n'))
		}
		if err != nil {
			return fmt.Errorf("write session: %w", err)
		}
	}
	s.flushed = snap
	return nil
}

// writeSnapshotLocked rewrites checkpoint.json and the session file and
// empties the journal. Called with s.mu held; it releases it. Item data
// still in memory is spooled (and synced) first. The snapshot is encoded
// item by item into its temporary file under the lock (no copy of the
// checkpoint is made), then synced and renamed without it.
func (s *State) writeSnapshotLocked() error {
	unlocked := false
	unlock := func() {
		if !unlocked {
			unlocked = true
			s.mu.Unlock()
		}
	}
	defer unlock()
	s.cp.FormatVersion = CheckpointFormat
	for _, it := range s.cp.Items {
		if err := s.spoolLocked(it); err != nil {
			s.full = s.version
			return err
		}
	}
	if s.spool != nil {
		if err := s.spool.sync(); err != nil {
			s.full = s.version
			return fmt.Errorf("write item data: %w", err)
		}
	}
	s.reindex()
	clear(s.dirty)
	s.sessionAt = s.now()
	counts := s.counts
	s.cp.ItemCounts = &counts
	sessData, err := json.MarshalIndent(sessionOf(s.cp, counts), "", "  ")
	if err != nil {
		return fmt.Errorf("encode session: %w", err)
	}
	sessData = s.redactJSON(sessData)
	path := s.paths.Checkpoint()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("write checkpoint: %w", err)
	}
	f, err := os.CreateTemp(filepath.Dir(path), fsx.TempPrefix+"*")
	if err != nil {
		return fmt.Errorf("write checkpoint: %w", err)
	}
	tmp := f.Name()
	size, err := s.encodeSnapshotLocked(f)
	unlock()
	if err == nil {
		err = f.Chmod(filePerm)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		s.mu.Lock()
		s.full = s.version
		s.mu.Unlock()
		return fmt.Errorf("write checkpoint: %w", err)
	}
	// The snapshot holds every journal entry (their versions are not
	// above its own), so a crash before the truncation loses nothing.
	if err := os.Truncate(s.paths.CheckpointJournal(), 0); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("empty the checkpoint journal: %w", err)
	}
	s.journalSize, s.snapshotSize, s.wroteOnce = 0, size, true
	if err := writeFile(s.paths.Session(), append(sessData, '\n')); err != nil {
		return fmt.Errorf("write session: %w", err)
	}
	return nil
}

// encodeSnapshotLocked writes the checkpoint as JSON to w: the job's
// fields, then "items" last, one item per line (each redacted on its own).
// It returns the bytes written.
func (s *State) encodeSnapshotLocked(w io.Writer) (int64, error) {
	head := *s.cp
	head.Items = nil
	hb, err := json.Marshal(&head)
	if err != nil {
		return 0, fmt.Errorf("encode checkpoint: %w", err)
	}
	const tail = `"items":null}`
	if !bytes.HasSuffix(hb, []byte(tail)) {
		return 0, fmt.Errorf("encode checkpoint: items is not the last field")
	}
	cw := &countWriter{w: bufio.NewWriterSize(w, 256<<10)}
	cw.Write(s.redactJSON(hb[:len(hb)-len(tail)]))
	cw.Write([]byte("\"items\":[\n"))
	var line []byte
	for i, it := range s.cp.Items {
		line = line[:0]
		if i > 0 {
			line = append(line, ",\n"...)
		}
		line, err = s.appendItem(line, it)
		if err != nil {
			return 0, fmt.Errorf("encode checkpoint item %s: %w", it.ItemID, err)
		}
		cw.Write(line)
	}
	cw.Write([]byte("\n]}\n"))
	if err := cw.w.Flush(); err != nil && cw.err == nil {
		cw.err = err
	}
	return cw.n, cw.err
}

// countWriter counts bytes and keeps the first error.
type countWriter struct {
	w   *bufio.Writer
	n   int64
	err error
}

func (c *countWriter) Write(p []byte) {
	if c.err != nil {
		return
	}
	n, err := c.w.Write(p)
	c.n += int64(n)
	c.err = err
}

// appendSync appends data to path (created 0600) and fsyncs it.
func appendSync(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, filePerm)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// HasCheckpoint reports whether the job has a checkpoint on disk.
func HasCheckpoint(p Paths) bool {
	_, err := os.Stat(p.Checkpoint())
	return err == nil
}

// CheckpointStamp identifies the checkpoint as it is on disk (size and
// modification time of the snapshot and of the journal): every durable
// write changes it. A reader that loaded the checkpoint before taking the
// job's lock compares stamps to know whether to load it again.
func CheckpointStamp(p Paths) string {
	var b strings.Builder
	for _, path := range []string{p.Checkpoint(), p.CheckpointJournal()} {
		fi, err := os.Stat(path)
		if err != nil {
			b.WriteString("-;")
			continue
		}
		fmt.Fprintf(&b, "%d:%d;", fi.Size(), fi.ModTime().UnixNano())
	}
	return b.String()
}

// LoadCheckpoint reads a job's checkpoint: checkpoint.json with the
// journal's newer entries applied (a torn last line, from a crash during
// its write, is ignored). A reader that races a compaction (the journal
// it finds does not continue the snapshot it read) reads both again.
func LoadCheckpoint(p Paths) (*Checkpoint, error) {
	for try := 0; ; try++ {
		var cp Checkpoint
		if err := readJSON(p.Checkpoint(), &cp); err != nil {
			return nil, fmt.Errorf("job %s: read checkpoint: %w", p.JobID, err)
		}
		if cp.FormatVersion < minFormat || cp.FormatVersion > CheckpointFormat {
			return nil, fmt.Errorf("job %s: checkpoint format %d is not supported (this version reads %d to %d)", p.JobID, cp.FormatVersion, minFormat, CheckpointFormat)
		}
		err := replayJournal(p.CheckpointJournal(), &cp, try < 5)
		if errors.Is(err, errJournalGap) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("job %s: read checkpoint journal: %w", p.JobID, err)
		}
		return &cp, nil
	}
}

// errJournalGap: the journal skips versions after the snapshot (it was
// compacted between reading the two).
var errJournalGap = errors.New("the journal does not continue the snapshot")

// replayJournal applies the journal entries newer than cp. Every write
// bumps the version by one, so the entries after the snapshot's version
// are contiguous; at a gap it returns errJournalGap when strict, else it
// stops there.
func replayJournal(path string, cp *Checkpoint, strict bool) error {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 64<<10)
	base := cp.CheckpointVersion // entries up to it are in the snapshot
	last := base
	for {
		line, err := r.ReadBytes('\n')
		if errors.Is(err, io.EOF) {
			return nil // a line without its newline is torn
		}
		if err != nil {
			return err
		}
		var e journalEntry
		if json.Unmarshal(line, &e) != nil || e.Item == nil {
			return nil // torn or foreign: stop at the last good entry
		}
		if e.V <= base {
			continue
		}
		if e.V > last+1 {
			if strict {
				return errJournalGap
			}
			return nil
		}
		last = e.V
		if e.Pos == len(cp.Items) {
			// An item appended since the snapshot (State.UpdateItems).
			cp.Items = append(cp.Items, e.Item)
		}
		if e.Pos < 0 || e.Pos >= len(cp.Items) {
			continue
		}
		if e.Item.DataLen == 0 {
			old := cp.Items[e.Pos]
			e.Item.Data, e.Item.DataOff, e.Item.DataLen = old.Data, old.DataOff, old.DataLen
		}
		cp.Items[e.Pos] = e.Item
		cp.CheckpointVersion = e.V
		cp.UpdatedAt = e.UpdatedAt
		cp.NextAgent = max(cp.NextAgent, e.NextAgent)
	}
}

// LoadSummary reads a job's checkpoint without its items: every job-level
// field, with ItemCounts set to the current item counts and Items nil. It
// reads checkpoint.json up to its items and the last entry of the
// journal, so its cost does not grow with the job. A checkpoint written by
// an older version (no counts) is read whole (LoadCheckpoint).
func LoadSummary(p Paths) (*Checkpoint, error) {
	for try := 0; try < 5; try++ {
		cp, err := readHead(p.Checkpoint())
		if err != nil {
			return nil, fmt.Errorf("job %s: read checkpoint: %w", p.JobID, err)
		}
		if cp.FormatVersion < minFormat || cp.FormatVersion > CheckpointFormat {
			return nil, fmt.Errorf("job %s: checkpoint format %d is not supported (this version reads %d to %d)", p.JobID, cp.FormatVersion, minFormat, CheckpointFormat)
		}
		if cp.ItemCounts == nil {
			break
		}
		e, err := journalTail(p.CheckpointJournal(), cp.CheckpointVersion)
		if errors.Is(err, errJournalGap) {
			continue
		}
		if errors.Is(err, errNoTail) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("job %s: read checkpoint journal: %w", p.JobID, err)
		}
		if e != nil {
			cp.CheckpointVersion, cp.UpdatedAt = e.V, e.UpdatedAt
			cp.NextAgent = max(cp.NextAgent, e.NextAgent)
			cp.ItemCounts = e.Counts
		}
		return cp, nil
	}
	cp, err := LoadCheckpoint(p)
	if err != nil {
		return nil, err
	}
	n := cp.Counts()
	cp.ItemCounts, cp.Items = &n, nil
	return cp, nil
}

// readHead decodes a checkpoint file's fields up to "items" (the last).
func readHead(path string) (*Checkpoint, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	cp, _, err := decodeHead(json.NewDecoder(bufio.NewReaderSize(f, 64<<10)), path)
	return cp, err
}

// decodeHead decodes a checkpoint's fields from dec up to "items" (the
// last), reporting whether it stopped at that key (the decoder is then
// at the items' value).
func decodeHead(dec *json.Decoder, path string) (*Checkpoint, bool, error) {
	atItems := false
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, false, fmt.Errorf("decode %s: not a JSON object", path)
	}
	fields := map[string]json.RawMessage{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, false, fmt.Errorf("decode %s: %w", path, err)
		}
		key, _ := t.(string)
		if key == "items" {
			atItems = true
			break
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, false, fmt.Errorf("decode %s: %w", path, err)
		}
		fields[key] = v
	}
	b, err := json.Marshal(fields)
	if err != nil {
		return nil, false, err
	}
	var cp Checkpoint
	if err := json.Unmarshal(b, &cp); err != nil {
		return nil, false, fmt.Errorf("decode %s: %w", path, err)
	}
	return &cp, atItems, nil
}

// errNoTail: the journal's last entry cannot be found cheaply (a very
// long last line, or entries of an older version without counts).
var errNoTail = errors.New("no summary at the end of the journal")

// tailWindow is how much of the journal's end journalTail reads.
const tailWindow = 256 << 10

// journalTail returns the journal's last complete entry newer than base
// (nil if none). Lines are only ever torn at the end (a crash during an
// append; the next write after a failed append is a snapshot, which empties
// the journal), so the last complete line is the newest state. The first
// entry must continue the snapshot (errJournalGap otherwise: the journal
// was compacted after the snapshot was read).
func journalTail(path string, base int) (*journalEntry, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	size := st.Size()
	if size == 0 {
		return nil, nil
	}
	first, err := bufio.NewReaderSize(f, 64<<10).ReadBytes('\n')
	if errors.Is(err, io.EOF) {
		return nil, nil // one torn line
	}
	if err != nil {
		return nil, err
	}
	var e0 journalEntry
	if json.Unmarshal(first, &e0) != nil || e0.Item == nil {
		return nil, nil // torn or foreign: LoadCheckpoint stops there too
	}
	if e0.V > base+1 {
		return nil, errJournalGap
	}
	off := max(0, size-tailWindow)
	buf := make([]byte, size-off)
	if _, err := f.ReadAt(buf, off); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	end := bytes.LastIndexByte(buf, '\n')
	for end >= 0 {
		start := bytes.LastIndexByte(buf[:end], '\n') + 1
		if start == 0 && off > 0 {
			return nil, errNoTail // the line may begin before the window
		}
		var e journalEntry
		if json.Unmarshal(buf[start:end], &e) == nil && e.Item != nil {
			if e.Counts == nil {
				return nil, errNoTail
			}
			if e.V <= base {
				return nil, nil
			}
			return &e, nil
		}
		end = start - 1
	}
	return nil, nil
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
