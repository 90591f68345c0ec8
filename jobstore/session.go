package jobstore

import "time"

// Session is the session file of the seeds (session-and-dlq-storage.md),
// kept current at sessions/session-<job_id>.json.
type Session struct {
	ID            string         `json:"id"`
	SessionType   string         `json:"session_type"`
	Status        string         `json:"status"`
	StartedAt     time.Time      `json:"started_at"`
	UpdatedAt     time.Time      `json:"updated_at"`
	CompletedAt   *time.Time     `json:"completed_at"`
	Metadata      map[string]any `json:"metadata"`
	Checkpoints   []any          `json:"checkpoints"`
	Timings       map[string]any `json:"timings"`
	Error         *string        `json:"error"`
	WorkflowData  any            `json:"workflow_data"`
	MapReduceData *MapReduceData `json:"mapreduce_data"`
}

// MapReduceData is the mapreduce_data block of a session.
type MapReduceData struct {
	JobID          string `json:"job_id"`
	TotalItems     int    `json:"total_items"`
	ProcessedItems int    `json:"processed_items"`
	FailedItems    int    `json:"failed_items"`
	AgentCount     int    `json:"agent_count"`
	Phase          string `json:"phase"`
	ReduceResults  any    `json:"reduce_results"`
}

// sessionStatus maps a job status to the seed's session state machine:
// Initializing → Running → Completed | Failed | Cancelled, Running ⇄ Paused.
// An interrupted (resumable) job is Paused.
func sessionStatus(cp *Checkpoint) string {
	switch cp.Status {
	case StatusCompleted:
		return "Completed"
	case StatusFailed:
		return "Failed"
	case StatusInterrupted, StatusBudgetExhausted, StatusStoppedByBreaker:
		return "Paused"
	}
	if cp.CheckpointVersion <= 1 && cp.Phase == PhaseSetup && !cp.SetupCompleted {
		return "Initializing"
	}
	return "Running"
}

func sessionPhase(phase string) string {
	switch phase {
	case PhaseSetup:
		return "Setup"
	case PhaseMap:
		return "Map"
	case PhaseReduce:
		return "Reduce"
	}
	return "Complete"
}

// SessionOf derives the session file of a checkpoint.
func SessionOf(cp *Checkpoint) *Session { return sessionOf(cp, cp.Counts()) }

// sessionOf derives the session file of cp whose items count n.
func sessionOf(cp *Checkpoint, n Counts) *Session {
	s := &Session{
		ID:          SessionID(cp.JobID),
		SessionType: "MapReduce",
		Status:      sessionStatus(cp),
		StartedAt:   cp.StartedAt,
		UpdatedAt:   cp.UpdatedAt,
		Metadata: map[string]any{
			"workflow_name":  cp.WorkflowName,
			"workflow_path":  cp.WorkflowPath,
			"repo_dir":       cp.RepoDir,
			"results_branch": cp.ResultsBranch,
		},
		Checkpoints: []any{},
		Timings:     map[string]any{"elapsed_ms": cp.ElapsedMS},
		MapReduceData: &MapReduceData{
			JobID:          cp.JobID,
			TotalItems:     n.Total,
			ProcessedItems: n.Merged + n.Skipped + n.DLQ,
			FailedItems:    n.DLQ,
			AgentCount:     cp.MaxParallel,
			Phase:          sessionPhase(cp.Phase),
		},
	}
	if cp.Error != "" {
		e := cp.Error
		s.Error = &e
	}
	if cp.Status == StatusCompleted || cp.Status == StatusFailed {
		t := cp.UpdatedAt
		s.CompletedAt = &t
	}
	return s
}
