package runner

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// Event types written to events.jsonl (names of Prodigy's event log).
const (
	evJobStarted      = "job_started"
	evJobResumed      = "job_resumed"
	evJobCompleted    = "job_completed"
	evJobFailed       = "job_failed"
	evJobInterrupted  = "job_paused"
	evAgentStarted    = "agent_started"
	evAgentRetrying   = "agent_retrying"
	evAgentCompleted  = "agent_completed"
	evAgentFailed     = "agent_failed"
	evItemSkipped     = "item_skipped"
	evDLQItemAdded    = "dlq_item_added"
	evDLQItemRemoved  = "dlq_item_removed"
	evDLQItemsEvicted = "dlq_items_evicted"
	evWorktreeCreated = "worktree_created"
	evWorktreeMerged  = "worktree_merged"
	evWorktreeCleaned = "worktree_cleaned"
	evCleanupFailed   = "worktree_cleanup_failed"
	evPhaseStarted    = "phase_started"
	evPhaseCompleted  = "phase_completed"
)

// EventRecord is one line of events.jsonl: an envelope with a unique id, a
// timestamp and the job id as correlation id around the event itself,
// whose `event_type` field names it.
type EventRecord struct {
	ID            string         `json:"id"`
	Timestamp     time.Time      `json:"timestamp"`
	CorrelationID string         `json:"correlation_id"`
	Event         map[string]any `json:"event"`
}

// eventLog appends events to a JSONL file; safe for concurrent use. Write
// errors are reported once through warn and never fail the job.
type eventLog struct {
	mu     sync.Mutex
	f      *os.File
	jobID  string
	now    func() time.Time
	warn   func(string)
	failed bool
	// redact, when set, runs over each line before it is written.
	redact func([]byte) []byte
}

func openEventLog(path, jobID string, now func() time.Time, warn func(string)) *eventLog {
	l := &eventLog{jobID: jobID, now: now, warn: warn}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		l.fail(err)
		return l
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		l.fail(err)
		return l
	}
	l.f = f
	return l
}

func (l *eventLog) fail(err error) {
	if !l.failed {
		l.failed = true
		l.warn(fmt.Sprintf("event log unavailable, continuing without it: %v", err))
	}
}

// emit writes one event; fields are merged into the event object.
func (l *eventLog) emit(eventType string, fields map[string]any) {
	ev := make(map[string]any, len(fields)+2)
	for k, v := range fields {
		ev[k] = v
	}
	ev["event_type"] = eventType
	ev["job_id"] = l.jobID
	rec := EventRecord{ID: newUUID(), Timestamp: l.now().UTC(), CorrelationID: l.jobID, Event: ev}
	line, err := json.Marshal(rec)
	if err != nil {
		l.mu.Lock()
		l.fail(err)
		l.mu.Unlock()
		return
	}
	if l.redact != nil {
		line = l.redact(line)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return
	}
	if _, err := l.f.Write(append(line, '\n')); err != nil {
		l.fail(err)
	}
}

func (l *eventLog) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f != nil {
		l.f.Close()
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
