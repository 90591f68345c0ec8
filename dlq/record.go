package dlq

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"
)

// ErrorKind names a variant of ErrorType, spelled as in the seeds' JSON.
type ErrorKind string

// The ErrorType variants of the seeds (session-and-dlq-storage.md).
const (
	Timeout                ErrorKind = "Timeout"
	CommandFailed          ErrorKind = "CommandFailed"
	CommitValidationFailed ErrorKind = "CommitValidationFailed"
	WorktreeError          ErrorKind = "WorktreeError"
	MergeConflict          ErrorKind = "MergeConflict"
	ValidationFailed       ErrorKind = "ValidationFailed"
	ResourceExhausted      ErrorKind = "ResourceExhausted"
	Unknown                ErrorKind = "Unknown"
)

// Kinds lists every ErrorKind in the seeds' order.
var Kinds = []ErrorKind{Timeout, CommandFailed, CommitValidationFailed, WorktreeError,
	MergeConflict, ValidationFailed, ResourceExhausted, Unknown}

func (k ErrorKind) valid() bool {
	for _, v := range Kinds {
		if k == v {
			return true
		}
	}
	return false
}

// ErrorType classifies a failure. Its JSON uses serde's external tagging:
// unit variants are strings ("Timeout") and CommandFailed is
// {"CommandFailed":{"exit_code":101}}. ExitCode is meaningful only for
// CommandFailed. The zero value marshals as "Unknown".
type ErrorType struct {
	Kind     ErrorKind
	ExitCode int
}

// CommandFailedWith returns the CommandFailed error type with exit code code.
func CommandFailedWith(code int) ErrorType { return ErrorType{Kind: CommandFailed, ExitCode: code} }

// String returns the variant name ("CommandFailed", "Timeout", …) without the
// exit code; it is the prefix of error signatures.
func (e ErrorType) String() string {
	if e.Kind == "" {
		return string(Unknown)
	}
	return string(e.Kind)
}

// Label is String plus the exit code of CommandFailed ("CommandFailed(101)"),
// for tables.
func (e ErrorType) Label() string {
	if e.Kind == CommandFailed {
		return fmt.Sprintf("CommandFailed(%d)", e.ExitCode)
	}
	return e.String()
}

type commandFailedJSON struct {
	ExitCode int `json:"exit_code"`
}

// MarshalJSON encodes the externally tagged form of the seeds.
func (e ErrorType) MarshalJSON() ([]byte, error) {
	if e.Kind == CommandFailed {
		return json.Marshal(map[string]commandFailedJSON{string(CommandFailed): {ExitCode: e.ExitCode}})
	}
	if e.Kind != "" && !e.Kind.valid() {
		return nil, fmt.Errorf("unknown error type %q", e.Kind)
	}
	return json.Marshal(e.String())
}

// UnmarshalJSON accepts a variant name string or a one-key object
// ({"CommandFailed":{"exit_code":N}}, or {"Timeout":null} for unit variants).
// Unknown variant names are an error.
func (e *ErrorType) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		k := ErrorKind(s)
		if !k.valid() {
			return fmt.Errorf("unknown error type %q", s)
		}
		*e = ErrorType{Kind: k}
		return nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return fmt.Errorf("error type must be a string or a one-key object: %w", err)
	}
	if len(m) != 1 {
		return fmt.Errorf("error type object must have exactly one key, got %d", len(m))
	}
	for name, body := range m {
		k := ErrorKind(name)
		if !k.valid() {
			return fmt.Errorf("unknown error type %q", name)
		}
		*e = ErrorType{Kind: k}
		if k == CommandFailed && len(body) > 0 && string(body) != "null" {
			var c struct {
				ExitCode *int `json:"exit_code"`
			}
			if err := json.Unmarshal(body, &c); err != nil {
				return fmt.Errorf("CommandFailed: %w", err)
			}
			if c.ExitCode != nil {
				e.ExitCode = *c.ExitCode
			}
		}
	}
	return nil
}

// FailureDetail is one failed attempt of an item (one failure_history entry).
// Field order and JSON names are the seeds'; error_context is omitted when
// empty, stack_trace and json_log_location are null when absent.
type FailureDetail struct {
	AttemptNumber   uint32    `json:"attempt_number"`
	Timestamp       time.Time `json:"timestamp"`
	ErrorType       ErrorType `json:"error_type"`
	ErrorMessage    string    `json:"error_message"`
	ErrorContext    []string  `json:"error_context,omitempty"`
	StackTrace      *string   `json:"stack_trace"`
	AgentID         string    `json:"agent_id"`
	StepFailed      string    `json:"step_failed"`
	DurationMS      uint64    `json:"duration_ms"`
	JSONLogLocation *string   `json:"json_log_location"`
}

// WorktreeArtifacts points at what the failed agent left behind.
// UncommittedChanges and ErrorLogs are descriptive text, null when absent.
type WorktreeArtifacts struct {
	WorktreePath       string  `json:"worktree_path"`
	BranchName         string  `json:"branch_name"`
	UncommittedChanges *string `json:"uncommitted_changes"`
	ErrorLogs          *string `json:"error_logs"`
}

// DeadLetteredItem is the record of one item id in the DLQ, with the seeds'
// exact JSON (field order of src/cook/execution/dlq.rs:31-43). Timestamps
// are RFC 3339 in UTC. FailureCount equals len(FailureHistory) for records
// this package writes. WorktreeArtifacts is null when the agent had none.
type DeadLetteredItem struct {
	ItemID               string             `json:"item_id"`
	ItemData             json.RawMessage    `json:"item_data"`
	FirstAttempt         time.Time          `json:"first_attempt"`
	LastAttempt          time.Time          `json:"last_attempt"`
	FailureCount         uint32             `json:"failure_count"`
	FailureHistory       []FailureDetail    `json:"failure_history"`
	ErrorSignature       string             `json:"error_signature"`
	WorktreeArtifacts    *WorktreeArtifacts `json:"worktree_artifacts"`
	ReprocessEligible    bool               `json:"reprocess_eligible"`
	ManualReviewRequired bool               `json:"manual_review_required"`
}

// LastFailure returns the newest failure_history entry, or false when the
// history is empty.
func (d DeadLetteredItem) LastFailure() (FailureDetail, bool) {
	if len(d.FailureHistory) == 0 {
		return FailureDetail{}, false
	}
	return d.FailureHistory[len(d.FailureHistory)-1], true
}

// LastErrorType is the error type of the newest failure (Unknown when the
// history is empty).
func (d DeadLetteredItem) LastErrorType() ErrorType {
	f, ok := d.LastFailure()
	if !ok {
		return ErrorType{Kind: Unknown}
	}
	return f.ErrorType
}

// Encode returns the record as written to its item file: two-space indented
// JSON followed by a newline (serde_json's pretty format).
func Encode(d DeadLetteredItem) ([]byte, error) {
	d = normalize(d)
	b, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode dlq item %q: %w", d.ItemID, err)
	}
	return append(b, '\n'), nil
}

// Decode parses one item file. It rejects records without an item_id.
func Decode(b []byte) (DeadLetteredItem, error) {
	var d DeadLetteredItem
	if err := json.Unmarshal(b, &d); err != nil {
		return DeadLetteredItem{}, err
	}
	if d.ItemID == "" {
		return DeadLetteredItem{}, fmt.Errorf("record has no item_id")
	}
	return d, nil
}

// normalize puts timestamps in UTC and item_data/failure_history in their
// non-null forms so encodings are canonical.
func normalize(d DeadLetteredItem) DeadLetteredItem {
	if len(d.ItemData) == 0 {
		d.ItemData = json.RawMessage("null")
	}
	if d.FailureHistory == nil {
		d.FailureHistory = []FailureDetail{}
	}
	d.FirstAttempt = d.FirstAttempt.UTC()
	d.LastAttempt = d.LastAttempt.UTC()
	if len(d.FailureHistory) > 0 {
		h := make([]FailureDetail, len(d.FailureHistory))
		for i, f := range d.FailureHistory {
			f.Timestamp = f.Timestamp.UTC()
			h[i] = f
		}
		d.FailureHistory = h
	}
	return d
}
