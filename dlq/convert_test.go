package dlq

import (
	"encoding/json"
	"testing"
	"time"
)

func TestFromAgentResultSuccessIsNil(t *testing.T) {
	r := AgentResult{ItemID: "item-3", Status: StatusSuccess, Failures: []Failure{{Message: "ignored"}}}
	if d := FromAgentResult(r); d != nil {
		t.Fatalf("FromAgentResult(success) = %+v, want nil", d)
	}
}

func TestFromAgentResult(t *testing.T) {
	t0 := at("2025-01-11T10:00:00Z")
	tests := []struct {
		name      string
		in        AgentResult
		wantTypes []ErrorType
		first     time.Time
		last      time.Time
		signature string
		eligible  bool
		manual    bool
		artifacts bool
	}{
		{
			name: "failed_classified_per_attempt",
			in: AgentResult{ItemID: "a", ItemData: json.RawMessage(`{"id":1}`), Status: StatusFailed, Failures: []Failure{
				{At: t0.Add(time.Minute), Message: "network timed out"},
				{At: t0, Message: "make failed with exit code 2"},
			}, WorktreePath: "/w", BranchName: "b"},
			wantTypes: []ErrorType{{Kind: Timeout}, CommandFailedWith(2)},
			first:     t0, last: t0.Add(time.Minute),
			signature: "CommandFailed::make failed with exit code", eligible: true, artifacts: true,
		},
		{
			name: "timeout_status_types_last_failure",
			in: AgentResult{ItemID: "b", Status: StatusTimeout, Failures: []Failure{
				{At: t0, Message: "make failed with exit code 2"},
				{At: t0.Add(time.Hour), Message: "killed"},
			}},
			wantTypes: []ErrorType{CommandFailedWith(2), {Kind: Timeout}},
			first:     t0, last: t0.Add(time.Hour), signature: "Timeout::killed", eligible: true,
		},
		{
			name: "explicit_type_wins",
			in: AgentResult{ItemID: "c", Status: StatusFailed, Failures: []Failure{
				{At: t0, Type: typ(ErrorType{Kind: CommitValidationFailed}), Message: "step made no commit"},
			}},
			wantTypes: []ErrorType{{Kind: CommitValidationFailed}},
			first:     t0, last: t0, signature: "CommitValidationFailed::step made no commit", manual: true,
		},
		{
			name:      "timeout_without_failures",
			in:        AgentResult{ItemID: "d", Status: StatusTimeout},
			wantTypes: []ErrorType{{Kind: Timeout}},
			signature: "Timeout::agent execution timed out", eligible: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := FromAgentResult(tt.in)
			if d == nil {
				t.Fatal("nil record")
			}
			if d.ItemID != tt.in.ItemID || int(d.FailureCount) != len(tt.wantTypes) || len(d.FailureHistory) != len(tt.wantTypes) {
				t.Fatalf("id/count/history = %q/%d/%d", d.ItemID, d.FailureCount, len(d.FailureHistory))
			}
			for i, want := range tt.wantTypes {
				if got := d.FailureHistory[i].ErrorType; got != want {
					t.Errorf("history[%d] type = %+v, want %+v", i, got, want)
				}
				if got := d.FailureHistory[i].AttemptNumber; got != uint32(i+1) {
					t.Errorf("history[%d] attempt = %d, want %d", i, got, i+1)
				}
			}
			if !d.FirstAttempt.Equal(tt.first) || !d.LastAttempt.Equal(tt.last) {
				t.Errorf("first/last = %v/%v, want %v/%v", d.FirstAttempt, d.LastAttempt, tt.first, tt.last)
			}
			if d.ErrorSignature != tt.signature {
				t.Errorf("signature = %q, want %q", d.ErrorSignature, tt.signature)
			}
			if d.ReprocessEligible != tt.eligible || d.ManualReviewRequired != tt.manual {
				t.Errorf("eligible/manual = %v/%v, want %v/%v", d.ReprocessEligible, d.ManualReviewRequired, tt.eligible, tt.manual)
			}
			if (d.WorktreeArtifacts != nil) != tt.artifacts {
				t.Errorf("artifacts = %+v, want present=%v", d.WorktreeArtifacts, tt.artifacts)
			}
			if string(d.ItemData) == "" {
				t.Error("item_data must never be empty")
			}
		})
	}
}

func TestFromAgentResultKeepsDetails(t *testing.T) {
	r := goldenResults()["command_failed"]
	d := FromAgentResult(r)
	f := d.FailureHistory[0]
	if f.JSONLogLocation == nil || *f.JSONLogLocation != r.Failures[0].LogPath {
		t.Errorf("json_log_location = %v, want %q", f.JSONLogLocation, r.Failures[0].LogPath)
	}
	if d.FailureHistory[1].JSONLogLocation != nil {
		t.Errorf("empty log path must be null, got %q", *d.FailureHistory[1].JSONLogLocation)
	}
	if f.DurationMS != 45000 || f.AgentID != "agent-1" || f.StepFailed != "shell: cargo test" {
		t.Errorf("detail = %+v", f)
	}
	if d.WorktreeArtifacts.WorktreePath != r.WorktreePath || *d.WorktreeArtifacts.UncommittedChanges != r.UncommittedChanges {
		t.Errorf("artifacts = %+v", d.WorktreeArtifacts)
	}
}
