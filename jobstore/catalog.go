package jobstore

import (
	"sort"
	"time"
)

// JobSummary is one job of the catalogue (a row of `jobs`): what its
// checkpoint's summary says, without reading its items.
type JobSummary struct {
	JobID         string    `json:"job_id"`
	Repo          string    `json:"repo"`
	RepoDir       string    `json:"repo_dir"`
	Workflow      string    `json:"workflow_name"`
	Status        JobStatus `json:"status"`
	Phase         string    `json:"phase"`
	Total         int       `json:"total"`
	Done          int       `json:"done"`
	Failed        int       `json:"failed"`
	Skipped       int       `json:"skipped"`
	Pending       int       `json:"pending"`
	DLQCount      int       `json:"dlq_count"`
	ResultsBranch string    `json:"results_branch"`
	StartedAt     time.Time `json:"started_at"`
	// Stale is set for a job whose checkpoint says running while no
	// process holds its lock (it crashed or was killed: resume it).
	Stale bool `json:"stale"`
}

// ListJobs summarises every job with a checkpoint under home (of one
// repository when repo != ""), newest first, reading each checkpoint's
// summary only (LoadSummary). Unreadable checkpoints are skipped.
// DLQCount is the number of the job's items in the DLQ by its checkpoint;
// the DLQ store's own count is the dlq package's (the CLI fills it in).
func ListJobs(home, repo string) ([]JobSummary, error) {
	all, err := Jobs(home)
	if err != nil {
		return nil, err
	}
	out := []JobSummary{}
	for _, p := range all {
		if repo != "" && p.Repo != repo {
			continue
		}
		cp, err := LoadSummary(p)
		if err != nil {
			continue
		}
		n := *cp.ItemCounts
		out = append(out, JobSummary{JobID: cp.JobID, Repo: p.Repo, RepoDir: cp.RepoDir, Workflow: cp.WorkflowName, Status: cp.Status,
			Phase: string(cp.Phase), Total: n.Total, Done: n.Merged, Failed: n.DLQ, Skipped: n.Skipped, Pending: n.Pending + n.Running,
			DLQCount: n.DLQ, ResultsBranch: cp.ResultsBranch, StartedAt: cp.StartedAt.UTC(),
			Stale: cp.Status == StatusRunning && !Locked(p)})
	}
	sort.SliceStable(out, func(a, b int) bool {
		if !out[a].StartedAt.Equal(out[b].StartedAt) {
			return out[a].StartedAt.After(out[b].StartedAt)
		}
		return out[a].JobID > out[b].JobID
	})
	return out, nil
}
