package actionapp

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

// jobPaths returns the runner's state paths of res's job.
func (r *actionRun) jobPaths(res *runner.Result) runner.Paths {
	return runner.Paths{Home: r.home, Repo: res.Repo, JobID: res.JobID}
}

// collect builds the report input from the result and the job's DLQ.
func (r *actionRun) collect(res *runner.Result) (report.Input, error) {
	in := report.Input{
		Title: res.WorkflowName, JobID: res.JobID, TraceID: res.TraceID, Status: string(res.Status), Error: res.Error,
		Command: r.in.Command, Total: res.Total, Successful: res.Successful, Failed: res.Failed,
		Skipped: res.Skipped, Pending: res.Pending, DLQCount: res.DLQCount, ResultsBranch: res.ResultsBranch,
		RunURL: r.runURL(), CostUSD: res.CostUSD, MaxCostUSD: res.MaxCostUSD, FleetCooldowns: res.FleetCooldowns,
		MergedCostUSD: res.MergedCostUSD, FailedCostUSD: res.FailedCostUSD, CostPerMergedUSD: res.CostPerMergedUSD,
	}
	if s := res.Storm; s != nil {
		// In Actions the job's state goes with the runner: the failed items
		// come back through the redrive (their DLQ artifact), the ones never
		// started by running the workflow again.
		in.Storm = &report.Storm{Signature: s.Signature, Items: s.Items, Consecutive: s.Limit,
			Continue: "redrive the failed items (the DLQ artifact of this run, below), and run this workflow again for the items never started"}
	}
	for _, o := range res.OrphanedWorktrees {
		in.Orphaned = append(in.Orphaned, report.OrphanedWorktree{Path: o.Path, Branch: o.Branch, ItemID: o.ItemID, Error: o.Error})
	}
	if res.Repo == "" || res.JobID == "" {
		return in, nil
	}
	store, err := dlq.Open(r.jobPaths(res).DLQRoot(), res.JobID, dlq.Options{Warn: func(m string) { r.env.gha.Warningf("DLQ: %s", r.redact.String(m)) }})
	if err != nil {
		return in, err
	}
	defer store.Close() // read only: nothing to flush
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

// uploadDLQ zips the job's DLQ records plus meta.json (the comment key,
// PR and history: data a redrive validates) and uploads them as
// <artifact-name>-<run_id>-<run_attempt>; nil when the DLQ is empty or the
// upload failed (which is a warning, never a job failure). Nothing
// executable (workflow, checkpoint) goes into the artifact.
// artifactClient is the current run's artifact service client
// (ACTIONS_RESULTS_URL, ACTIONS_RUNTIME_TOKEN), with the Action's HTTP
// client, retry sleeper and log masking.
func (r *actionRun) artifactClient() (*ghaction.ArtifactClient, error) {
	e := r.env
	return ghaction.NewArtifactClient(ghaction.ArtifactClientOptions{
		ResultsURL: e.Getenv("ACTIONS_RESULTS_URL"), RuntimeToken: e.Getenv("ACTIONS_RUNTIME_TOKEN"),
		HTTPClient: e.HTTPClient, Retry: ghaction.RetryPolicy{Sleep: e.RetrySleep}, Mask: e.gha.AddMask,
	})
}

// retentionDays is the artifact-retention-days input, capped by the
// repository's limit as the toolkit caps it (0: the repository default).
func (r *actionRun) retentionDays() int {
	days := r.in.ArtifactRetentionDays
	if limit := int(r.ctx.RetentionDays); limit > 0 && days > limit {
		days = limit
	}
	return days
}

func (r *actionRun) uploadDLQ(ctx context.Context, res *runner.Result, rep report.Input, meta artifactMeta) *report.Artifact {
	if len(rep.FailedItems) == 0 || res.Repo == "" {
		return nil
	}
	e := r.env
	metaPath, err := r.writeMeta(res, meta)
	if err != nil {
		e.gha.Warningf("DLQ artifact not uploaded: %s", r.redact.String(oneLine(err)))
		return nil
	}
	defer os.Remove(metaPath)
	blob, n, done, err := r.dlqZip(res, metaPath)
	if err != nil {
		e.gha.Warningf("DLQ artifact not uploaded: %s", r.redact.String(oneLine(err)))
		return nil
	}
	defer done()
	if n == 0 {
		return nil
	}
	client, err := r.artifactClient()
	if err != nil {
		e.gha.Warningf("DLQ artifact not uploaded: %s", oneLine(err))
		return nil
	}
	name := fmt.Sprintf("%s-%d-%d", r.in.ArtifactName, r.ctx.RunID, max(r.ctx.RunAttempt, 1))
	up, err := client.UploadUniqueFrom(ctx, name, blob, r.retentionDays(), 10)
	if err != nil {
		e.gha.Warningf("DLQ artifact not uploaded: %s", r.redact.String(oneLine(err)))
		return nil
	}
	art := &report.Artifact{Name: up.Name, ID: up.ID, ExpiresAt: up.ExpiresAt}
	if art.ExpiresAt.IsZero() && r.ctx.RetentionDays > 0 {
		art.ExpiresAt = e.now().UTC().Add(time.Duration(r.ctx.RetentionDays) * 24 * time.Hour)
	}
	if u := r.runURL(); u != "" && up.ID != 0 {
		art.URL = fmt.Sprintf("%s/artifacts/%d", u, up.ID)
	}
	e.gha.Noticef("DLQ artifact %s uploaded (%d item(s), %d bytes)", up.Name, n, up.Size)
	return art
}

// dlqZip writes the job's DLQ zip (ghaction.WriteDLQZipFile, with
// meta.json) to a temporary file next to the job's state and returns it as
// a blob to upload, its record count, and a function that removes the
// file. The zip is streamed: memory does not grow with the number of
// records.
func (r *actionRun) dlqZip(res *runner.Result, metaPath string) (ghaction.Blob, int, func(), error) {
	nothing := func() {}
	f, err := os.CreateTemp(r.jobPaths(res).JobStateDir(), "dlq-artifact-*.zip")
	if err != nil {
		return ghaction.Blob{}, 0, nothing, fmt.Errorf("create the DLQ zip: %w", err)
	}
	done := func() { f.Close(); os.Remove(f.Name()) }
	blob, n, err := ghaction.WriteDLQZipFile(f, dlq.Dir(r.jobPaths(res).DLQRoot(), res.JobID), r.redact.JSON,
		ghaction.ExtraFile{Name: zipMeta, Path: metaPath})
	if err != nil {
		done()
		return ghaction.Blob{}, 0, nothing, fmt.Errorf("write the DLQ zip: %w", err)
	}
	return blob, n, done, nil
}

// writeMeta writes meta.json for the artifact into the job's state dir.
func (r *actionRun) writeMeta(res *runner.Result, meta artifactMeta) (string, error) {
	b, err := json.MarshalIndent(meta, "", "  ")
	if err != nil {
		return "", fmt.Errorf("encode %s: %w", zipMeta, err)
	}
	dir := r.jobPaths(res).JobStateDir()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("create %s: %w", dir, err)
	}
	p := filepath.Join(dir, "artifact-"+zipMeta)
	if err := os.WriteFile(p, append(b, '\n'), 0o644); err != nil {
		return "", fmt.Errorf("write %s: %w", p, err)
	}
	return p, nil
}

// prNumber is the pull request to comment on: the event's, else the
// pr-number input, else the one the redriven artifact's run commented on
// (0: none).
func (r *actionRun) prNumber(fromArtifact int) int {
	pr, err := ghaction.PullRequestNumber(r.ctx.EventName, r.ctx.Event, r.in.PRNumber)
	if err != nil {
		r.env.gha.Warningf("%s", oneLine(err))
		return 0
	}
	if pr == 0 {
		pr = fromArtifact
	}
	return pr
}

// comment posts or edits the sticky PR comment (keyed by key, taking over
// one keyed by a legacy key) per the
// comment input, with the fan-out's run history appended; a fork PR's
// read-only token becomes a notice in the summary.
func (r *actionRun) comment(ctx context.Context, res *runner.Result, rep report.Input, pr int, key string, legacy []string, history string) {
	e := r.env
	switch r.in.Comment {
	case ghaction.CommentNever:
		return
	case ghaction.CommentOnFailure:
		if rep.DLQCount == 0 && res.Status == runner.StatusCompleted {
			return
		}
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
	body := report.Comment(rep)
	if history != "" {
		body += "\n" + history
	}
	body = r.redact.String(body)
	res2, err := ghaction.UpsertSticky(ctx, gh, ghaction.Sticky{Owner: r.owner, Repo: r.repo, PR: pr, Key: key, LegacyKeys: legacy, Body: body}) // no Author: the token's own login
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
