package runner

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"
)

// checkpointFormat is bumped when the checkpoint layout changes incompatibly.
const checkpointFormat = 1

// Phases of a job, as stored in the checkpoint.
const (
	phaseSetup  = "setup"
	phaseMap    = "map"
	phaseReduce = "reduce"
	phaseDone   = "done"
)

// Checkpoint is the resumable state of a job, written atomically to
// state/<repo>/jobs/<job_id>/checkpoint.json after every item.
type Checkpoint struct {
	FormatVersion     int       `json:"format_version"`
	CheckpointVersion int       `json:"checkpoint_version"`
	JobID             string    `json:"job_id"`
	Repo              string    `json:"repo"`
	RepoDir           string    `json:"repo_dir"`
	WorkflowPath      string    `json:"workflow_path"`
	WorkflowName      string    `json:"workflow_name"`
	ResultsBranch     string    `json:"results_branch"`
	BaseCommit        string    `json:"base_commit"`
	ParentWorktree    string    `json:"parent_worktree"`
	Isolation         Isolation `json:"isolation"`
	Merge             MergeMode `json:"merge"`
	MaxParallel       int       `json:"max_parallel"`
	ClaudeCommand     string    `json:"claude_command,omitempty"`
	ClaudeArgs        []string  `json:"claude_args,omitempty"`
	Status            JobStatus `json:"status"`
	Phase             string    `json:"phase"`
	SetupCompleted    bool      `json:"setup_completed"`
	ReduceCompleted   bool      `json:"reduce_completed"`
	Error             string    `json:"error,omitempty"`
	StartedAt         time.Time `json:"started_at"`
	UpdatedAt         time.Time `json:"updated_at"`
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

// counts tallies item states.
type counts struct {
	total, merged, skipped, dlq, pending, running int
}

func (c *Checkpoint) counts() counts {
	var n counts
	n.total = len(c.Items)
	for _, it := range c.Items {
		switch it.State {
		case ItemMerged:
			n.merged++
		case ItemSkipped:
			n.skipped++
		case ItemDLQ:
			n.dlq++
		case ItemRunning:
			n.running++
		default:
			n.pending++
		}
	}
	return n
}

// result builds the public Result of the checkpoint.
func (c *Checkpoint) result() *Result {
	n := c.counts()
	r := &Result{
		JobID:         c.JobID,
		Status:        c.Status,
		Total:         n.total,
		Successful:    n.merged,
		Failed:        n.dlq,
		Skipped:       n.skipped,
		Pending:       n.pending + n.running,
		DLQCount:      n.dlq,
		ResultsBranch: c.ResultsBranch,
		DurationMS:    c.ElapsedMS,
		Repo:          c.Repo,
		RepoDir:       c.RepoDir,
		WorkflowName:  c.WorkflowName,
		Error:         c.Error,
		Items:         make([]ItemOutcome, 0, len(c.Items)),
	}
	for _, it := range c.Items {
		r.Items = append(r.Items, it.ItemOutcome)
	}
	return r
}

// jobState guards the checkpoint and writes it with group commit: callers
// change the state under the lock, then wait until a write that includes
// their change is on disk. Concurrent finishers share one write.
type jobState struct {
	paths Paths
	now   func() time.Time
	// redact runs over the checkpoint and session JSON before writing.
	redact func([]byte) []byte

	mu      sync.Mutex
	cp      *Checkpoint
	version uint64

	flushMu sync.Mutex
	flushed uint64
}

// update applies fn to the checkpoint and makes the change durable.
func (s *jobState) update(fn func(cp *Checkpoint)) error {
	s.mu.Lock()
	fn(s.cp)
	s.version++
	v := s.version
	s.mu.Unlock()
	return s.flush(v)
}

// read runs fn with the checkpoint locked; fn must not keep references.
func (s *jobState) read(fn func(cp *Checkpoint)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fn(s.cp)
}

func (s *jobState) flush(v uint64) error {
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	if s.flushed >= v {
		return nil
	}
	s.mu.Lock()
	s.cp.CheckpointVersion++
	s.cp.UpdatedAt = s.now().UTC()
	data, err := json.MarshalIndent(s.cp, "", "  ")
	sessData, serr := json.MarshalIndent(newSession(s.cp), "", "  ")
	snap := s.version
	s.mu.Unlock()
	if err = errors.Join(err, serr); err != nil {
		return fmt.Errorf("encode checkpoint: %w", err)
	}
	if s.redact != nil {
		data, sessData = s.redact(data), s.redact(sessData)
	}
	if err := writeFileAtomic(s.paths.Checkpoint(), append(data, '\n')); err != nil {
		return fmt.Errorf("write checkpoint: %w", err)
	}
	if err := writeFileAtomic(s.paths.Session(), append(sessData, '\n')); err != nil {
		return fmt.Errorf("write session: %w", err)
	}
	s.flushed = snap
	return nil
}

// loadCheckpoint reads a job's checkpoint.
func loadCheckpoint(p Paths) (*Checkpoint, error) {
	var cp Checkpoint
	if err := readJSON(p.Checkpoint(), &cp); err != nil {
		return nil, fmt.Errorf("job %s: read checkpoint: %w", p.JobID, err)
	}
	if cp.FormatVersion != checkpointFormat {
		return nil, fmt.Errorf("job %s: checkpoint format %d is not supported (want %d)", p.JobID, cp.FormatVersion, checkpointFormat)
	}
	return &cp, nil
}
