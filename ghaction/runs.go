package ghaction

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/google/go-github/v60/github"
)

// RunInfo is what a redrive checks about a workflow run before it trusts
// the run's artifacts (GET /repos/{owner}/{repo}/actions/runs/{id}).
type RunInfo struct {
	ID         int64
	Event      string // "pull_request", "push", "workflow_dispatch", …
	Path       string // the workflow file, ".github/workflows/example.yml"
	RunAttempt int
	// Repository is the full name of the repository the run belongs to.
	Repository string
	// HeadRepository is the full name of the repository the run's code came
	// from; "" when the API gave none (e.g. the fork was deleted).
	HeadRepository string
	// HeadFork is head_repository.fork.
	HeadFork bool
	// PullRequests are the numbers of the run's pull requests in this
	// repository (GitHub lists none for pull requests from forks).
	PullRequests []int
}

// runJSON is the part of the run object RunInfo needs (go-github v60's
// WorkflowRun has no `path`).
type runJSON struct {
	ID         int64  `json:"id"`
	Event      string `json:"event"`
	Path       string `json:"path"`
	RunAttempt int    `json:"run_attempt"`
	Repository *struct {
		FullName string `json:"full_name"`
	} `json:"repository"`
	HeadRepository *struct {
		FullName string `json:"full_name"`
		Fork     bool   `json:"fork"`
	} `json:"head_repository"`
	PullRequests []struct {
		Number int `json:"number"`
	} `json:"pull_requests"`
}

// GetRun fetches workflow run runID of owner/repo. A 404 says "run N not
// found in owner/repo (or the token lacks `actions: read`)" and matches
// ErrNotFound; a 403 is a *PermissionError naming `actions: read`.
func GetRun(ctx context.Context, gh *github.Client, owner, repo string, runID int64) (RunInfo, error) {
	if runID <= 0 {
		return RunInfo{}, fmt.Errorf("get run: invalid run id %d", runID)
	}
	req, err := gh.NewRequest(http.MethodGet, fmt.Sprintf("repos/%s/%s/actions/runs/%d", owner, repo, runID), nil)
	if err != nil {
		return RunInfo{}, fmt.Errorf("get run %d: %w", runID, err)
	}
	var raw runJSON
	resp, err := gh.Do(ctx, req, &raw)
	if err != nil {
		if resp != nil && resp.StatusCode == http.StatusNotFound {
			return RunInfo{}, fmt.Errorf("run %d not found in %s/%s (or the token lacks `actions: read`): %w", runID, owner, repo, ErrNotFound)
		}
		return RunInfo{}, classify(fmt.Sprintf("get run %d of %s/%s", runID, owner, repo), "actions: read", resp, err)
	}
	info := RunInfo{ID: raw.ID, Event: raw.Event, Path: raw.Path, RunAttempt: raw.RunAttempt}
	if raw.Repository != nil {
		info.Repository = raw.Repository.FullName
	}
	if raw.HeadRepository != nil {
		info.HeadRepository, info.HeadFork = raw.HeadRepository.FullName, raw.HeadRepository.Fork
	}
	for _, pr := range raw.PullRequests {
		info.PullRequests = append(info.PullRequests, pr.Number)
	}
	return info, nil
}

// ErrUntrustedRun is matched by CheckRunSource's refusals.
var ErrUntrustedRun = errors.New("untrusted run")

// CheckRunSource decides whether the artifacts of run may be redriven in
// owner/repo. The run must belong to owner/repo (else refused, always), and
// its code must come from owner/repo itself: a run whose head repository is
// a fork (head_repository.fork, or a full name other than the run's
// repository, or none at all) could have been made by anyone able to open a
// pull request, so it is refused unless allowFork is set; then the returned
// warning says what is being trusted. Comparisons ignore case, as GitHub
// does.
func CheckRunSource(run RunInfo, owner, repo string, allowFork bool) (warning string, err error) {
	want := owner + "/" + repo
	if !strings.EqualFold(run.Repository, want) {
		return "", fmt.Errorf("%w: run %d belongs to %q, not to this repository %s; a redrive only reads this repository's runs", ErrUntrustedRun, run.ID, run.Repository, want)
	}
	var why string
	switch {
	case run.HeadRepository == "":
		why = "the run's head repository is unknown (a deleted fork?)"
	case run.HeadFork || !strings.EqualFold(run.HeadRepository, run.Repository):
		why = fmt.Sprintf("the run's code came from the fork %s", run.HeadRepository)
	default:
		return "", nil
	}
	if allowFork {
		return fmt.Sprintf("redriving run %d although %s (allow-fork-artifacts is set): its DLQ records are imported as data only", run.ID, why), nil
	}
	return "", fmt.Errorf("%w: %s; anyone who can open a pull request can upload an artifact to such a run, so its DLQ is not redriven (set allow-fork-artifacts: true to import its records anyway, as data only)", ErrUntrustedRun, why)
}

// ListRunArtifacts lists every artifact of run runID (all pages, expired
// ones included, in the API's order). A 404 says the run was not found or
// the token lacks `actions: read`.
func ListRunArtifacts(ctx context.Context, gh *github.Client, owner, repo string, runID int64) ([]*github.Artifact, error) {
	op := fmt.Sprintf("list artifacts of run %d in %s/%s", runID, owner, repo)
	var all []*github.Artifact
	opts := &github.ListOptions{PerPage: 100}
	for {
		list, resp, err := gh.Actions.ListWorkflowRunArtifacts(ctx, owner, repo, runID, opts)
		if err != nil {
			if resp != nil && resp.StatusCode == http.StatusNotFound {
				return nil, fmt.Errorf("%s: run %d not found in %s/%s (or the token lacks `actions: read`): %w", op, runID, owner, repo, ErrNotFound)
			}
			return nil, classify(op, "actions: read", resp, err)
		}
		all = append(all, list.Artifacts...)
		if resp.NextPage == 0 {
			return all, nil
		}
		opts.Page = resp.NextPage
	}
}

// DescribeExpired says when artifact a expired and its retention, e.g.
// "artifact prodigy-dlq-5-1 expired on 2026-01-31 (retention 3 days)".
func DescribeExpired(a *github.Artifact) string {
	msg := "artifact " + a.GetName() + " has expired"
	if a.ExpiresAt == nil {
		return msg
	}
	msg = fmt.Sprintf("artifact %s expired on %s", a.GetName(), a.GetExpiresAt().UTC().Format("2006-01-02"))
	if a.CreatedAt != nil {
		days := int(a.GetExpiresAt().Sub(a.GetCreatedAt().Time).Round(24*time.Hour) / (24 * time.Hour))
		msg += fmt.Sprintf(" (retention %d days)", days)
	}
	return msg
}
