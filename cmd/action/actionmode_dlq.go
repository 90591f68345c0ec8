package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/prodigy-action/prodigy-action/dlq"
	"github.com/prodigy-action/prodigy-action/ghaction"
	"github.com/prodigy-action/prodigy-action/report"
	"github.com/prodigy-action/prodigy-action/runner"
)

// Paths inside the DLQ zip besides the DLQ folder itself: the job's state,
// so a later run (command: retry) can redrive the job.
const (
	zipCheckpoint = "job/checkpoint.json"
	zipWorkflow   = "job/workflow.yml"
)

// jobPaths returns the runner's state paths of res's job.
func (r *actionRun) jobPaths(res *runner.Result) runner.Paths {
	return runner.Paths{Home: r.home, Repo: res.Repo, JobID: res.JobID}
}

// collect builds the report input from the result and the job's DLQ.
func (r *actionRun) collect(res *runner.Result) (report.Input, error) {
	in := report.Input{
		Title: res.WorkflowName, JobID: res.JobID, Status: string(res.Status), Error: res.Error,
		Command: r.in.Command, Total: res.Total, Successful: res.Successful, Failed: res.Failed,
		Skipped: res.Skipped, Pending: res.Pending, DLQCount: res.DLQCount, ResultsBranch: res.ResultsBranch,
		RunURL: r.runURL(),
	}
	for _, o := range res.OrphanedWorktrees {
		in.Orphaned = append(in.Orphaned, report.OrphanedWorktree{Path: o.Path, Branch: o.Branch, ItemID: o.ItemID, Error: o.Error})
	}
	if res.Repo == "" || res.JobID == "" {
		return in, nil
	}
	store, err := dlq.Open(r.home, res.Repo, res.JobID, dlq.Options{Warn: func(m string) { r.env.gha.Warningf("DLQ: %s", r.redact.String(m)) }})
	if err != nil {
		return in, err
	}
	ineligible := false
	err = store.Each(func(d dlq.DeadLetteredItem) error {
		fi := report.FailedItem{ItemID: d.ItemID, ErrorType: d.LastErrorType().String(), Signature: d.ErrorSignature,
			Attempts: int(d.FailureCount), ReprocessEligible: d.ReprocessEligible}
		if f, ok := d.LastFailure(); ok {
			fi.LastError = f.ErrorMessage
			if f.JSONLogLocation != nil {
				fi.LogLocation = *f.JSONLogLocation
			}
		}
		ineligible = ineligible || !d.ReprocessEligible
		in.FailedItems = append(in.FailedItems, fi)
		return nil
	})
	if err != nil {
		return in, err
	}
	sort.Slice(in.FailedItems, func(i, j int) bool { return in.FailedItems[i].ItemID < in.FailedItems[j].ItemID })
	an, err := dlq.Analyze(store)
	if err != nil {
		return in, err
	}
	for _, g := range an.PatternGroups {
		in.Patterns = append(in.Patterns, report.PatternGroup{Signature: g.Signature, ErrorType: g.ErrorType, Count: g.Count, Items: g.SampleItems})
	}
	in.DLQCount = len(in.FailedItems)
	in.Redrive = r.redriveInfo(ineligible && len(in.FailedItems) > 0 && allIneligible(in.FailedItems))
	return in, nil
}

func allIneligible(items []report.FailedItem) bool {
	for _, it := range items {
		if it.ReprocessEligible {
			return false
		}
	}
	return true
}

// uploadDLQ zips the job's DLQ (plus its state) and uploads it as
// <artifact-name>-<run_id>-<run_attempt>; nil when the DLQ is empty or the
// upload failed (which is a warning, never a job failure).
func (r *actionRun) uploadDLQ(ctx context.Context, res *runner.Result, rep report.Input) *report.Artifact {
	if len(rep.FailedItems) == 0 || res.Repo == "" {
		return nil
	}
	e := r.env
	p := r.jobPaths(res)
	data, n, err := ghaction.BuildDLQZip(dlq.JobDir(r.home, res.Repo, res.JobID), r.redact.Bytes,
		ghaction.ExtraFile{Name: zipCheckpoint, Path: p.Checkpoint()},
		ghaction.ExtraFile{Name: zipWorkflow, Path: p.WorkflowCopy()})
	if err != nil {
		e.gha.Warningf("DLQ artifact not uploaded: %s", r.redact.String(oneLine(err)))
		return nil
	}
	if n == 0 {
		return nil
	}
	client, err := ghaction.NewArtifactClient(ghaction.ArtifactClientOptions{
		ResultsURL: e.getenv("ACTIONS_RESULTS_URL"), RuntimeToken: e.getenv("ACTIONS_RUNTIME_TOKEN"),
		HTTPClient: e.hc, Retry: ghaction.RetryPolicy{Sleep: e.retrySleep}, Mask: e.gha.AddMask,
	})
	if err != nil {
		e.gha.Warningf("DLQ artifact not uploaded: %s", oneLine(err))
		return nil
	}
	name := fmt.Sprintf("%s-%d-%d", r.in.ArtifactName, r.ctx.RunID, max(r.ctx.RunAttempt, 1))
	days := r.in.ArtifactRetentionDays
	if max := int(r.ctx.RetentionDays); max > 0 && days > max {
		days = max // the repository's limit caps the request, as in the toolkit
	}
	up, err := client.UploadUnique(ctx, name, data, days, 10)
	if err != nil {
		e.gha.Warningf("DLQ artifact not uploaded: %s", r.redact.String(oneLine(err)))
		return nil
	}
	art := &report.Artifact{Name: up.Name, ID: up.ID, ExpiresAt: up.ExpiresAt}
	if art.ExpiresAt.IsZero() && r.ctx.RetentionDays > 0 {
		art.ExpiresAt = time.Now().UTC().Add(time.Duration(r.ctx.RetentionDays) * 24 * time.Hour)
	}
	if u := r.runURL(); u != "" && up.ID != 0 {
		art.URL = fmt.Sprintf("%s/artifacts/%d", u, up.ID)
	}
	e.gha.Noticef("DLQ artifact %s uploaded (%d item(s), %d bytes)", up.Name, n, up.Size)
	return art
}

// restoreDLQ downloads the newest DLQ artifact of run retry-from-run and
// installs its records and job state under the state directory; it returns
// the job id to redrive.
func (r *actionRun) restoreDLQ(ctx context.Context) (string, error) {
	gh, err := r.github()
	if err != nil {
		return "", err
	}
	a, err := ghaction.FindRunArtifact(ctx, gh, r.owner, r.repo, r.in.RetryFromRun, r.in.ArtifactName)
	if err != nil {
		return "", err
	}
	data, err := ghaction.DownloadRunArtifact(ctx, gh, r.env.blob, r.owner, r.repo, a.GetID(), 0)
	if err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp("", "prodigy-dlq-")
	if err != nil {
		return "", fmt.Errorf("create a temp dir: %w", err)
	}
	defer os.RemoveAll(tmp)
	if err := ghaction.ExtractZip(data, tmp, ghaction.ExtractLimits{}); err != nil {
		return "", fmt.Errorf("artifact %s: %w", a.GetName(), err)
	}
	var cp struct {
		JobID string `json:"job_id"`
	}
	raw, err := os.ReadFile(filepath.Join(tmp, filepath.FromSlash(zipCheckpoint)))
	if err != nil {
		return "", fmt.Errorf("artifact %s has no job state (%s); it was not made by this action's run command: %w", a.GetName(), zipCheckpoint, err)
	}
	if err := json.Unmarshal(raw, &cp); err != nil || runner.ValidJobID(cp.JobID) != nil {
		return "", fmt.Errorf("artifact %s: invalid %s", a.GetName(), zipCheckpoint)
	}
	repo := filepath.Base(r.ws)
	if top, err := gitTopLevel(ctx, r.ws); err == nil {
		repo = filepath.Base(top)
	}
	p := runner.Paths{Home: r.home, Repo: repo, JobID: cp.JobID}
	dlqDir := dlq.JobDir(r.home, repo, cp.JobID)
	copies := map[string]string{
		zipCheckpoint: p.Checkpoint(), zipWorkflow: p.WorkflowCopy(), "index.json": filepath.Join(dlqDir, "index.json"),
	}
	items, _ := os.ReadDir(filepath.Join(tmp, "items"))
	for _, it := range items {
		if it.Type().IsRegular() {
			copies["items/"+it.Name()] = filepath.Join(dlqDir, "items", it.Name())
		}
	}
	for from, to := range copies {
		if err := copyFile(filepath.Join(tmp, filepath.FromSlash(from)), to); err != nil && !errors.Is(err, os.ErrNotExist) {
			return "", err
		}
	}
	if err := r.ensureResultsBranch(ctx, p); err != nil {
		return "", err
	}
	r.env.gha.Noticef("redriving job %s from artifact %s of run %d (%d record(s))", cp.JobID, a.GetName(), r.in.RetryFromRun, len(items))
	return cp.JobID, nil
}

func copyFile(from, to string) error {
	data, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		return fmt.Errorf("create %s: %w", filepath.Dir(to), err)
	}
	if err := os.WriteFile(to, data, 0o644); err != nil {
		return fmt.Errorf("write %s: %w", to, err)
	}
	return nil
}

// comment posts or edits the sticky PR comment per the comment input; a
// fork PR's read-only token becomes a notice in the summary.
func (r *actionRun) comment(ctx context.Context, res *runner.Result, rep report.Input) {
	e := r.env
	switch r.in.Comment {
	case ghaction.CommentNever:
		return
	case ghaction.CommentOnFailure:
		if rep.DLQCount == 0 && res.Status == runner.StatusCompleted {
			return
		}
	}
	pr, err := ghaction.PullRequestNumber(r.ctx.EventName, r.ctx.Event, r.in.PRNumber)
	if err != nil {
		e.gha.Warningf("%s", oneLine(err))
		return
	}
	if pr == 0 {
		e.gha.Debugf("no pull request for event %s: no comment", r.ctx.EventName)
		return
	}
	gh, err := r.github()
	if err != nil {
		e.gha.Warningf("comment: %s", oneLine(err))
		return
	}
	key := r.ctx.Workflow + " / " + r.ctx.Job
	body := r.redact.String(report.Comment(rep))
	res2, err := ghaction.UpsertStickyComment(ctx, gh, r.owner, r.repo, pr, key, "", body) // "": the token's own login
	switch {
	case errors.Is(err, ghaction.ErrForbidden) || errors.Is(err, ghaction.ErrNotFound):
		msg := fmt.Sprintf("Could not comment on PR #%d (the token is read-only, as on pull requests from forks, or lacks `pull-requests: write`); the results are in this summary.", pr)
		e.gha.Noticef("%s", msg)
		r.notices = append(r.notices, msg)
	case err != nil:
		e.gha.Warningf("comment on PR #%d: %s", pr, r.redact.String(oneLine(err)))
	case res2.Created:
		e.gha.Infof("created PR comment %s\n", res2.URL)
	default:
		e.gha.Infof("updated PR comment %s\n", res2.URL)
	}
}
