package jobstore

import (
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"time"
)

// CheckpointFormat is bumped when the checkpoint layout changes incompatibly.
const CheckpointFormat = 1

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
}

// Timings is the per-item overhead split reported by benchmarks.
type Timings struct {
	Prepare     float64 `json:"prepare"`
	Steps       float64 `json:"steps"`
	Merge       float64 `json:"merge"`
	Cleanup     float64 `json:"cleanup"`
	Bookkeeping float64 `json:"bookkeeping"`
}

// Checkpoint is the resumable state of a job, written atomically to
// state/<repo>/jobs/<job_id>/checkpoint.json after every item.
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
	Isolation       string    `json:"isolation"`
	Merge           string    `json:"merge"`
	MaxParallel     int       `json:"max_parallel"`
	ClaudeCommand   string    `json:"claude_command,omitempty"`
	ClaudeArgs      []string  `json:"claude_args,omitempty"`
	Status          JobStatus `json:"status"`
	Phase           string    `json:"phase"`
	SetupCompleted  bool      `json:"setup_completed"`
	ReduceCompleted bool      `json:"reduce_completed"`
	Error           string    `json:"error,omitempty"`
	StartedAt       time.Time `json:"started_at"`
	UpdatedAt       time.Time `json:"updated_at"`
	// ElapsedMS accumulates the wall time of earlier runs (resume adds to it).
	ElapsedMS int64 `json:"elapsed_ms"`
	// NextAgent numbers agents uniquely across runs of the job.
	NextAgent int `json:"next_agent"`
	// Vars are values captured by setup steps, visible to map and reduce.
	Vars  map[string]string `json:"vars"`
	Items []*CheckpointItem `json:"items"`
}

// CheckpointItem is one work item with its current state.
type CheckpointItem struct {
	ItemOutcome
	Index int             `json:"index"`
	Data  json.RawMessage `json:"data"`
}

// Counts tallies the items of a checkpoint by state.
type Counts struct {
	Total, Merged, Skipped, DLQ, Pending, Running int
}

// Counts tallies item states.
func (c *Checkpoint) Counts() Counts {
	var n Counts
	n.Total = len(c.Items)
	for _, it := range c.Items {
		switch it.State {
		case ItemMerged:
			n.Merged++
		case ItemSkipped:
			n.Skipped++
		case ItemDLQ:
			n.DLQ++
		case ItemRunning:
			n.Running++
		default:
			n.Pending++
		}
	}
	return n
}

// State guards a job's checkpoint in memory and writes it (with the
// session file) with group commit: callers change the state under the
// lock, then wait until a write that includes their change is on disk.
// Concurrent finishers share one write. Safe for concurrent use.
type State struct {
	paths Paths
	now   func() time.Time

	mu      sync.Mutex
	cp      *Checkpoint
	version uint64

	flushMu sync.Mutex
	flushed uint64
}

// NewState wraps cp; now stamps updated_at. Nothing is written until the
// first Update.
func NewState(p Paths, cp *Checkpoint, now func() time.Time) *State {
	return &State{paths: p, now: now, cp: cp}
}

// Update applies fn to the checkpoint and makes the change durable:
// checkpoint.json and the session file are rewritten atomically.
func (s *State) Update(fn func(cp *Checkpoint)) error {
	s.mu.Lock()
	fn(s.cp)
	s.version++
	v := s.version
	s.mu.Unlock()
	return s.flush(v)
}

// Read runs fn with the checkpoint locked; fn must not keep references.
func (s *State) Read(fn func(cp *Checkpoint)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fn(s.cp)
}

func (s *State) flush(v uint64) error {
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	if s.flushed >= v {
		return nil
	}
	s.mu.Lock()
	s.cp.CheckpointVersion++
	s.cp.UpdatedAt = s.now().UTC()
	data, err := json.MarshalIndent(s.cp, "", "  ")
	sess := SessionOf(s.cp)
	snap := s.version
	s.mu.Unlock()
	if err != nil {
		return fmt.Errorf("encode checkpoint: %w", err)
	}
	if err := writeFile(s.paths.Checkpoint(), append(data, '\n')); err != nil {
		return fmt.Errorf("write checkpoint: %w", err)
	}
	if err := writeJSON(s.paths.Session(), sess); err != nil {
		return fmt.Errorf("write session: %w", err)
	}
	s.flushed = snap
	return nil
}

// HasCheckpoint reports whether the job has a checkpoint on disk.
func HasCheckpoint(p Paths) bool {
	_, err := os.Stat(p.Checkpoint())
	return err == nil
}

// LoadCheckpoint reads a job's checkpoint.
func LoadCheckpoint(p Paths) (*Checkpoint, error) {
	var cp Checkpoint
	if err := readJSON(p.Checkpoint(), &cp); err != nil {
		return nil, fmt.Errorf("job %s: read checkpoint: %w", p.JobID, err)
	}
	if cp.FormatVersion != CheckpointFormat {
		return nil, fmt.Errorf("job %s: checkpoint format %d is not supported (want %d)", p.JobID, cp.FormatVersion, CheckpointFormat)
	}
	return &cp, nil
}
