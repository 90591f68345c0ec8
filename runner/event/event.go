package event

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/prodigy-action/prodigy-action/dlq"
	"github.com/prodigy-action/prodigy-action/jobstore"
	"github.com/prodigy-action/prodigy-action/runner/worktree"
)

// Event is one event of a job's event log (events.jsonl). Every event type
// is a struct below whose fields are the event's JSON fields; the emitter
// adds "event_type" (EventType) and "job_id". The names are those of
// Prodigy's event log.
type Event interface {
	// EventType is the event's "event_type" value.
	EventType() string
}

// JobStarted: a new job begins (after its state is created).
type JobStarted struct {
	Workflow      string `json:"workflow"`
	ResultsBranch string `json:"results_branch"`
	MaxParallel   int    `json:"max_parallel"`
	// TraceID is the execution's trace id when it is traced (Engine.Tracer).
	TraceID string `json:"trace_id,omitempty"`
}

// JobResumed: a resume or a DLQ redrive continues a job.
type JobResumed JobStarted

// JobCompleted: the job completed (items in the DLQ do not fail it).
type JobCompleted struct {
	Successful int   `json:"successful"`
	Failed     int   `json:"failed"`
	Skipped    int   `json:"skipped"`
	DurationMS int64 `json:"duration_ms"`
}

// JobPaused: the job was interrupted; Pending items are left for resume.
type JobPaused struct {
	Pending int `json:"pending"`
}

// JobFailed: setup, reduce or a stop policy failed the job.
type JobFailed struct {
	Error   string `json:"error"`
	Pending int    `json:"pending"`
}

// PhaseStarted: setup, map or reduce begins; Items is the number of items
// the map phase runs (absent for setup and reduce).
type PhaseStarted struct {
	Phase string `json:"phase"`
	Items int    `json:"items,omitempty"`
}

// PhaseCompleted: setup, map or reduce ended.
type PhaseCompleted struct {
	Phase string `json:"phase"`
}

// AgentStarted: an agent takes an item; Attempt is its first attempt number.
type AgentStarted struct {
	AgentID string `json:"agent_id"`
	ItemID  string `json:"item_id"`
	Attempt int    `json:"attempt"`
	Branch  string `json:"branch"`
}

// AgentRetrying: an attempt failed; attempt Attempt starts after BackoffMS.
type AgentRetrying struct {
	AgentID   string `json:"agent_id"`
	ItemID    string `json:"item_id"`
	Attempt   int    `json:"attempt"`
	BackoffMS int64  `json:"backoff_ms"`
	Error     string `json:"error"`
}

// AgentCompleted: the item succeeded and its commits are merged.
// CleanupStatus says whether its worktree was cleaned up (spec 136);
// JSONLogLocation is the last claude transcript, or null.
type AgentCompleted struct {
	AgentID         string                 `json:"agent_id"`
	ItemID          string                 `json:"item_id"`
	DurationMS      int64                  `json:"duration_ms"`
	Commits         int                    `json:"commits"`
	JSONLogLocation *string                `json:"json_log_location"`
	CleanupStatus   worktree.CleanupStatus `json:"cleanup_status"`
	Attempts        int                    `json:"attempts"`
	// CostUSD is what the item's claude steps cost (all attempts).
	CostUSD float64 `json:"cost_usd"`
}

// AgentFailed: the item's attempts are exhausted; on_item_failure decides
// what follows (item_skipped or dlq_item_added).
type AgentFailed struct {
	AgentID         string        `json:"agent_id"`
	ItemID          string        `json:"item_id"`
	Error           string        `json:"error"`
	ErrorType       dlq.ErrorType `json:"error_type"`
	Attempts        int           `json:"attempts"`
	JSONLogLocation *string       `json:"json_log_location"`
	RetryEligible   bool          `json:"retry_eligible"`
	// CostUSD is what the item's claude steps cost (all attempts).
	CostUSD float64 `json:"cost_usd"`
}

// ItemSkippedEvent (named apart from the item state
// jobstore.ItemSkipped): a failed item is skipped (on_item_failure skip,
// or a custom handler that succeeded); Policy is the on_item_failure value.
type ItemSkippedEvent struct {
	ItemID string `json:"item_id"`
	Error  string `json:"error"`
	Policy string `json:"policy"`
}

// DLQItemAdded: a failed item's record was written to the DLQ.
type DLQItemAdded struct {
	ItemID         string `json:"item_id"`
	ErrorSignature string `json:"error_signature"`
	FailureCount   uint32 `json:"failure_count"`
}

// DLQItemRemoved: a redriven item succeeded and left the DLQ.
type DLQItemRemoved struct {
	ItemID string `json:"item_id"`
}

// DLQItemsEvicted: the DLQ was full; the oldest records were evicted.
type DLQItemsEvicted struct {
	ItemIDs []string `json:"item_ids"`
	Count   int      `json:"count"`
}

// WorktreeCreated: an agent worktree was created, for an agent or (Pool)
// as a reusable pool slot before any agent runs.
type WorktreeCreated struct {
	AgentID string `json:"agent_id,omitempty"`
	Path    string `json:"path"`
	Branch  string `json:"branch,omitempty"`
	Pool    bool   `json:"pool,omitempty"`
}

// WorktreeMerged: an agent's branch was merged into the results branch.
type WorktreeMerged struct {
	AgentID string `json:"agent_id"`
	ItemID  string `json:"item_id"`
	Branch  string `json:"branch"`
	Commits int    `json:"commits"`
}

// WorktreeCleaned: an agent worktree was cleaned (pool) or removed (fresh).
type WorktreeCleaned struct {
	AgentID string `json:"agent_id"`
	ItemID  string `json:"item_id"`
	Path    string `json:"path"`
}

// WorktreeCleanupFailed: a worktree could not be cleaned up; it is in the
// orphan registry and the item's outcome is unaffected (spec 136).
type WorktreeCleanupFailed struct {
	AgentID string `json:"agent_id"`
	ItemID  string `json:"item_id"`
	Path    string `json:"path"`
	Error   string `json:"error"`
}

func (JobStarted) EventType() string            { return "job_started" }
func (JobResumed) EventType() string            { return "job_resumed" }
func (JobCompleted) EventType() string          { return "job_completed" }
func (JobPaused) EventType() string             { return "job_paused" }
func (JobFailed) EventType() string             { return "job_failed" }
func (PhaseStarted) EventType() string          { return "phase_started" }
func (PhaseCompleted) EventType() string        { return "phase_completed" }
func (AgentStarted) EventType() string          { return "agent_started" }
func (AgentRetrying) EventType() string         { return "agent_retrying" }
func (AgentCompleted) EventType() string        { return "agent_completed" }
func (AgentFailed) EventType() string           { return "agent_failed" }
func (ItemSkippedEvent) EventType() string      { return "item_skipped" }
func (DLQItemAdded) EventType() string          { return "dlq_item_added" }
func (DLQItemRemoved) EventType() string        { return "dlq_item_removed" }
func (DLQItemsEvicted) EventType() string       { return "dlq_items_evicted" }
func (WorktreeCreated) EventType() string       { return "worktree_created" }
func (WorktreeMerged) EventType() string        { return "worktree_merged" }
func (WorktreeCleaned) EventType() string       { return "worktree_cleaned" }
func (WorktreeCleanupFailed) EventType() string { return "worktree_cleanup_failed" }

// EventRecord is one line of events.jsonl: an envelope with a unique id, a
// timestamp and the job id as correlation id around the event object, which
// holds "event_type", "job_id" and the fields of the event's struct.
type EventRecord struct {
	ID            string          `json:"id"`
	Timestamp     time.Time       `json:"timestamp"`
	CorrelationID string          `json:"correlation_id"`
	Event         json.RawMessage `json:"event"`
}

// Log is the job's one event emitter: it appends events to
// events.jsonl; safe for concurrent use. Write errors are reported once
// through warn and never fail the job.
type Log struct {
	mu     sync.Mutex
	f      *os.File
	jobID  string
	now    func() time.Time
	warn   func(string)
	failed bool
	// Redact, when set, runs over each line before it is written; set it
	// before the first Emit.
	Redact func([]byte) []byte
}

// Open opens job p's event file (jobstore.OpenEvents) for appending; now
// stamps each event, warn reports (once) that the log cannot be written.
func Open(p jobstore.Paths, now func() time.Time, warn func(string)) *Log {
	l := &Log{jobID: p.JobID, now: now, warn: warn}
	f, err := jobstore.OpenEvents(p)
	if err != nil {
		l.fail(err)
		return l
	}
	l.f = f
	return l
}

func (l *Log) fail(err error) {
	if !l.failed {
		l.failed = true
		l.warn(fmt.Sprintf("event log unavailable, continuing without it: %v", err))
	}
}

// Emit writes one event (never failing the job).
func (l *Log) Emit(ev Event) {
	line, err := encodeEvent(l.jobID, newUUID(), l.now().UTC(), ev)
	if err == nil && l.Redact != nil {
		line = l.Redact(line)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		l.fail(err)
		return
	}
	if l.f == nil {
		return
	}
	if _, err := l.f.Write(line); err != nil {
		l.fail(err)
	}
}

// encodeEvent renders one events.jsonl line (newline included).
func encodeEvent(jobID, id string, at time.Time, ev Event) ([]byte, error) {
	fields, err := json.Marshal(ev)
	if err != nil || len(fields) < 2 || fields[0] != '{' {
		return nil, fmt.Errorf("encode %s event: %w", ev.EventType(), err)
	}
	head, err := json.Marshal(struct {
		Type  string `json:"event_type"`
		JobID string `json:"job_id"`
	}{ev.EventType(), jobID})
	if err != nil {
		return nil, fmt.Errorf("encode %s event: %w", ev.EventType(), err)
	}
	obj := head[:len(head)-1]
	if len(fields) > 2 {
		obj = append(append(obj, ','), fields[1:]...)
	} else {
		obj = append(obj, '}')
	}
	line, err := json.Marshal(EventRecord{ID: id, Timestamp: at, CorrelationID: jobID, Event: obj})
	if err != nil {
		return nil, fmt.Errorf("encode %s event: %w", ev.EventType(), err)
	}
	return append(line, '\n'), nil
}

// Close closes the event file.
func (l *Log) Close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f != nil {
		if err := l.f.Close(); err != nil {
			l.fail(err)
		}
		l.f = nil
	}
}

// newUUID returns a random (version 4) UUID string.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// StrOrNil is s, or nil when s is empty (a JSON null).
func StrOrNil(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// BreakerTripped: error_policy.circuit_breaker saw Consecutive finished
// items in a row fail with one error signature and stopped launching.
type BreakerTripped struct {
	Signature   string   `json:"signature"`
	Items       []string `json:"items"`
	Consecutive int      `json:"consecutive"`
	Pending     int      `json:"pending"`
}

func (BreakerTripped) EventType() string { return "breaker_tripped" }

// FleetCooldownStarted: an attempt failed because the provider
// rate-limited or was overloaded; no agent starts before Until (running
// agents continue).
type FleetCooldownStarted struct {
	Until  time.Time `json:"until"`
	Reason string    `json:"reason"`
}

// FleetCooldownEnded: the cool-down is over; agents start again.
type FleetCooldownEnded struct{}

func (FleetCooldownStarted) EventType() string { return "fleet_cooldown_started" }
func (FleetCooldownEnded) EventType() string   { return "fleet_cooldown_ended" }
