package ghaction

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strings"

	"github.com/google/go-github/v60/github"
)

// Approval is one review of a run's deployment to protected environments
// (GET /repos/{owner}/{repo}/actions/runs/{run_id}/approvals).
type Approval struct {
	// State is "approved" or "rejected".
	State   string
	Comment string
	// User is the reviewer's login.
	User string
	// Environments are the names of the environments the review was for.
	Environments []string
}

type approvalJSON struct {
	State        string `json:"state"`
	Comment      string `json:"comment"`
	Environments []struct {
		Name string `json:"name"`
	} `json:"environments"`
	User *struct {
		Login string `json:"login"`
	} `json:"user"`
}

// ListRunApprovals fetches the review history of workflow run runID: who
// approved or rejected its deployments to protected environments, with
// their comments. A 404 says the run was not found or the token lacks
// `actions: read`; a 403 is a *PermissionError naming it.
func ListRunApprovals(ctx context.Context, gh *github.Client, owner, repo string, runID int64) ([]Approval, error) {
	if runID <= 0 {
		return nil, fmt.Errorf("list approvals: invalid run id %d", runID)
	}
	op := fmt.Sprintf("list the approvals of run %d in %s/%s", runID, owner, repo)
	req, err := gh.NewRequest(http.MethodGet, fmt.Sprintf("repos/%s/%s/actions/runs/%d/approvals", owner, repo, runID), nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	var raw []approvalJSON
	resp, err := gh.Do(ctx, req, &raw)
	if err != nil {
		if resp != nil && resp.StatusCode == http.StatusNotFound {
			return nil, fmt.Errorf("%s: run not found (or the token lacks `actions: read`): %w", op, ErrNotFound)
		}
		return nil, classify(op, "actions: read", resp, err)
	}
	out := make([]Approval, 0, len(raw))
	for _, a := range raw {
		ap := Approval{State: a.State, Comment: a.Comment}
		if a.User != nil {
			ap.User = a.User.Login
		}
		for _, e := range a.Environments {
			ap.Environments = append(ap.Environments, e.Name)
		}
		out = append(out, ap)
	}
	return out, nil
}

// rejectLine is a reviewer's verdict on one item in an approval comment:
// "reject ITEM_ID" or "reject ITEM_ID: reason" (case-insensitive keyword,
// one per line).
var rejectLine = regexp.MustCompile(`(?i)^\s*reject\s+([^\s:]+)\s*(?::\s*(.*))?$`)

// ReviewVerdict reads the approvals of environment env: approved is
// whether any reviewer approved it, and rejected maps the item ids that
// approving reviewers rejected in their comments ("reject ITEM_ID: reason"
// lines) to the reason, followed by the reviewer's login. Environment
// names compare without case, as GitHub's do.
func ReviewVerdict(approvals []Approval, env string) (approved bool, rejected map[string]string) {
	rejected = map[string]string{}
	for _, a := range approvals {
		if a.State != "approved" || !containsFold(a.Environments, env) {
			continue
		}
		approved = true
		for _, line := range strings.Split(a.Comment, "\n") {
			m := rejectLine.FindStringSubmatch(strings.TrimSpace(line))
			if m == nil {
				continue
			}
			why := strings.TrimSpace(m[2])
			if why == "" {
				why = "rejected"
			}
			if a.User != "" {
				why += " (@" + a.User + ")"
			}
			if _, seen := rejected[m[1]]; !seen {
				rejected[m[1]] = why
			}
		}
	}
	return approved, rejected
}

func containsFold(list []string, s string) bool {
	for _, v := range list {
		if strings.EqualFold(v, s) {
			return true
		}
	}
	return false
}
