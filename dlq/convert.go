package dlq

import (
	"encoding/json"
	"time"
)

// Status is the final status of an agent (spec 138's AgentStatus).
type Status int

// Agent statuses: only StatusFailed and StatusTimeout produce a record.
const (
	StatusSuccess Status = iota
	StatusFailed
	StatusTimeout
)

// Failure is one failed attempt as the runner observed it.
type Failure struct {
	// Attempt is the 1-based attempt number; 0 means "position in Failures + 1".
	Attempt int
	// At is when the attempt failed.
	At time.Time
	// Type is the known error type; nil means Classify(Message).
	Type *ErrorType
	// Message is the human-readable error.
	Message string
	// Context is the context trail (error_context), oldest first.
	Context []string
	// StackTrace is stderr or a trace; "" is stored as null.
	StackTrace string
	// AgentID identifies the agent that ran the attempt.
	AgentID string
	// Step is the step that failed, e.g. "shell: cargo test".
	Step string
	// Duration is how long the attempt ran.
	Duration time.Duration
	// LogPath is the Claude transcript (json_log_location); "" is stored as null.
	LogPath string
}

// AgentResult is what the runner knows about one item when its attempts are
// exhausted. The runner fills one Failure per failed attempt, in order.
type AgentResult struct {
	ItemID   string
	ItemData json.RawMessage
	Status   Status
	Failures []Failure
	// Worktree artifacts; when WorktreePath and BranchName are both empty the
	// record's worktree_artifacts is null. Empty strings are stored as null.
	WorktreePath, BranchName, UncommittedChanges, ErrorLogs string
}

// FromAgentResult converts a finished agent into a DLQ record (spec 138,
// pure). It returns nil for StatusSuccess. failure_history has one entry per
// Failure; first_attempt/last_attempt are the earliest/latest Failure.At;
// error_signature, reprocess_eligible and manual_review_required come from
// the last Failure. A Failure with a nil Type is classified from its message,
// except that the last failure of a StatusTimeout result is a Timeout. A
// failed result without Failures gets one synthetic Unknown (or Timeout)
// failure at the zero time, so the record is never empty.
func FromAgentResult(r AgentResult) *DeadLetteredItem {
	if r.Status == StatusSuccess {
		return nil
	}
	failures := r.Failures
	if len(failures) == 0 {
		msg := "agent failed without recording an error"
		if r.Status == StatusTimeout {
			msg = "agent execution timed out"
		}
		failures = []Failure{{Attempt: 1, Message: msg}}
	}
	d := &DeadLetteredItem{
		ItemID:         r.ItemID,
		ItemData:       r.ItemData,
		FailureCount:   uint32(len(failures)),
		FailureHistory: make([]FailureDetail, len(failures)),
	}
	for i, f := range failures {
		t := failureType(f, r.Status == StatusTimeout && i == len(failures)-1)
		d.FailureHistory[i] = failureDetail(f, i, t)
		at := f.At.UTC()
		if i == 0 || at.Before(d.FirstAttempt) {
			d.FirstAttempt = at
		}
		if i == 0 || at.After(d.LastAttempt) {
			d.LastAttempt = at
		}
	}
	last := d.FailureHistory[len(d.FailureHistory)-1]
	d.ErrorSignature = Signature(last.ErrorType, last.ErrorMessage)
	d.ReprocessEligible = ReprocessEligible(last.ErrorType, last.ErrorMessage)
	d.ManualReviewRequired = ManualReviewRequired(last.ErrorType, last.ErrorMessage)
	if r.WorktreePath != "" || r.BranchName != "" {
		d.WorktreeArtifacts = &WorktreeArtifacts{
			WorktreePath:       r.WorktreePath,
			BranchName:         r.BranchName,
			UncommittedChanges: optional(r.UncommittedChanges),
			ErrorLogs:          optional(r.ErrorLogs),
		}
	}
	n := normalize(*d)
	return &n
}

func failureType(f Failure, timedOut bool) ErrorType {
	switch {
	case f.Type != nil:
		return *f.Type
	case timedOut:
		return ErrorType{Kind: Timeout}
	default:
		return Classify(f.Message)
	}
}

func failureDetail(f Failure, i int, t ErrorType) FailureDetail {
	attempt := f.Attempt
	if attempt <= 0 {
		attempt = i + 1
	}
	var ctx []string
	if len(f.Context) > 0 {
		ctx = append([]string(nil), f.Context...)
	}
	return FailureDetail{
		AttemptNumber:   uint32(attempt),
		Timestamp:       f.At.UTC(),
		ErrorType:       t,
		ErrorMessage:    f.Message,
		ErrorContext:    ctx,
		StackTrace:      optional(f.StackTrace),
		AgentID:         f.AgentID,
		StepFailed:      f.Step,
		DurationMS:      uint64(max(f.Duration.Milliseconds(), 0)),
		JSONLogLocation: optional(f.LogPath),
	}
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
