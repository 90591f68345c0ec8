package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/prodigy-action/prodigy-action/config"
	"github.com/prodigy-action/prodigy-action/dlq"
	"github.com/prodigy-action/prodigy-action/gitops"
	"github.com/prodigy-action/prodigy-action/internal/fsx"
	"github.com/prodigy-action/prodigy-action/jobstore"
)

// PlanFormat is the format_version of plan.json.
const PlanFormat = 1

// MaxShards is the largest shard count (a GitHub Actions matrix holds at
// most 256 jobs).
const MaxShards = 256

// Plan is DIR/plan.json: everything a shard runner and the gatherer need
// besides the repository itself.
type Plan struct {
	FormatVersion int    `json:"format_version"`
	JobID         string `json:"job_id"`
	// BaseCommit is the results branch after setup: every shard starts there.
	BaseCommit string `json:"base_commit"`
	// OriginCommit is the commit setup started from; base.bundle holds
	// OriginCommit..BaseCommit and needs OriginCommit in the clone.
	OriginCommit  string `json:"origin_commit"`
	ResultsBranch string `json:"results_branch"`
	// Bundle is true when setup made commits and DIR/base.bundle exists.
	Bundle       bool   `json:"bundle"`
	WorkflowName string `json:"workflow_name"`
	// Workflow is the workflow file's text.
	Workflow    string `json:"workflow"`
	MaxParallel int    `json:"max_parallel"`
	// Vars are setup's captured values (checkpoint vars).
	Vars   map[string]string `json:"vars"`
	Shards []PlanShard       `json:"shards"`
	Items  []PlanItem        `json:"items"`
	// FromDLQ is the job whose DLQ records this plan redrives ("" if none).
	FromDLQ string `json:"from_dlq,omitempty"`
}

// PlanShard lists the item ids of one shard, in input order.
type PlanShard struct {
	Shard int      `json:"shard"`
	Items []string `json:"items"`
}

// PlanItem is one work item of a plan.
type PlanItem struct {
	ID    string          `json:"id"`
	Index int             `json:"index"`
	Data  json.RawMessage `json:"data"`
	// Attempts already made (a redriven DLQ record's failure_count).
	Attempts int `json:"attempts,omitempty"`
	// Record is the DLQ record a redriven item comes from (histories are
	// kept: gather puts it back in front of new failures).
	Record json.RawMessage `json:"record,omitempty"`
}

// PlanOptions configures PlanJob.
type PlanOptions struct {
	// Run carries the job settings (Workflow, RepoDir, Home, JobID, MaxParallel, Stderr, …).
	Run Options
	// Dir is the plan directory (created).
	Dir string
	// Shards is the shard count; 0 means auto (see AutoShards).
	Shards int
	// FromDLQ plans only the reprocess-eligible DLQ records of that job
	// (found under Run.Home) instead of the workflow's input: item ids and
	// attempt counts are kept, setup does not run again (its captured
	// values are reused) and the base is that job's results branch when it
	// exists here (else HEAD).
	FromDLQ string
}

// PlanFile is the plan file inside a plan directory.
func PlanFile(dir string) string { return filepath.Join(dir, "plan.json") }

// BaseBundle is the base bundle inside a plan directory.
func BaseBundle(dir string) string { return filepath.Join(dir, "base.bundle") }

// PlanJob runs setup once, exactly as Run does (a parent worktree on the
// results branch prodigy/<job_id>), loads and selects the items as Run
// would, splits them into shards and writes DIR/plan.json, plus
// DIR/base.bundle when setup made commits. The results branch stays in the
// repository (at the base commit); the job's state is removed, so the
// gatherer creates it afresh. A failed plan leaves nothing behind.
func PlanJob(ctx context.Context, po PlanOptions) (*Plan, error) {
	o := po.Run
	o.defaults()
	if po.Dir == "" {
		return nil, usage(errors.New("no plan directory given"))
	}
	po.Dir = absPath(po.Dir) // git writes base.bundle from elsewhere: never relative
	if po.Shards < 0 || po.Shards > MaxShards {
		return nil, usage(fmt.Errorf("--shards must be between 1 and %d (or auto)", MaxShards))
	}
	var redrive []*dlq.DeadLetteredItem
	var from *jobstore.Checkpoint
	if po.FromDLQ != "" {
		p, err := FindJob(o.Home, "", po.FromDLQ)
		if err != nil {
			return nil, err
		}
		if from, err = jobstore.LoadCheckpoint(p); err != nil {
			return nil, err
		}
		if redrive, err = eligibleRecords(p); err != nil {
			return nil, err
		}
	}
	j, head, err := prepare(ctx, &o)
	if err != nil {
		return nil, err
	}
	unlock, err := j.lock()
	if err != nil {
		return nil, err
	}
	defer unlock()
	start := head
	if from != nil {
		// A redrive builds on the earlier job's results (setup already ran there).
		if tip, err := j.git.ResolveRef(ctx, "refs/heads/"+from.ResultsBranch); err == nil {
			start = tip
		}
	}
	if err := j.create(ctx, &o, start); err != nil {
		j.rollback()
		return nil, err
	}
	plan, err := j.plan(ctx, po, head, redrive, from)
	if err != nil {
		j.rollback()
		return nil, err
	}
	j.events.close()
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	j.trees.close(cctx)
	j.steps.values.close()
	_ = j.git.WorktreeRemove(cctx, j.parentDir)
	_ = j.git.WorktreePrune(cctx)
	if err := j.store.Close(); err != nil {
		j.warn(fmt.Sprintf("DLQ: %v", err))
	}
	if err := jobstore.RemoveJob(j.paths); err != nil {
		j.warn(fmt.Sprintf("could not remove the planning state of job %s: %v", j.id, err))
	}
	j.logf("plan %s: %d item(s) in %d shard(s); base %s on %s", plan.JobID, len(plan.Items), len(plan.Shards), short(plan.BaseCommit), plan.ResultsBranch)
	return plan, nil
}

// plan runs setup and item loading and writes the plan directory.
// origin is the repository's HEAD (base.bundle excludes it); from is the
// redriven job's checkpoint (nil unless --from-dlq): then setup does not
// run again and its captured values are reused.
func (j *job) plan(ctx context.Context, po PlanOptions, origin string, redrive []*dlq.DeadLetteredItem, from *jobstore.Checkpoint) (*Plan, error) {
	runCtx, stopGrace := j.graceContext(ctx)
	defer stopGrace()
	if from == nil {
		if err := j.setup(ctx, runCtx); err != nil {
			return nil, err
		}
		if err := j.loadItems(ctx); err != nil {
			return nil, err
		}
	} else if err := j.state.Update(func(cp *jobstore.Checkpoint) {
		for k, v := range from.Vars {
			cp.Vars[k] = v
		}
	}); err != nil {
		return nil, err
	}
	base, err := j.git.ResolveRef(ctx, "refs/heads/"+j.branch)
	if err != nil {
		return nil, err
	}
	p := &Plan{
		FormatVersion: PlanFormat, JobID: j.id, BaseCommit: base, OriginCommit: origin, ResultsBranch: j.branch,
		WorkflowName: j.wf.Name, MaxParallel: j.maxParallel, FromDLQ: po.FromDLQ, Items: []PlanItem{},
	}
	if data, err := os.ReadFile(j.wf.Path); err == nil {
		p.Workflow = string(j.red.Bytes(data))
	} else {
		return nil, usage(fmt.Errorf("read the workflow: %w", err))
	}
	var list []*jobstore.CheckpointItem
	j.state.Read(func(cp *jobstore.Checkpoint) {
		p.Vars = map[string]string{}
		for k, v := range cp.Vars {
			p.Vars[k] = v
		}
		list = slices.Clone(cp.Items)
	})
	for _, it := range list {
		data, err := j.state.ItemData(it)
		if err != nil {
			return nil, err
		}
		p.Items = append(p.Items, PlanItem{ID: it.ItemID, Index: it.Index, Data: data})
	}
	for i, r := range redrive {
		b, err := dlq.Encode(*r)
		if err != nil {
			return nil, err
		}
		p.Items = append(p.Items, PlanItem{ID: r.ItemID, Index: i, Data: r.ItemData, Attempts: int(r.FailureCount), Record: b})
	}
	n := po.Shards
	if n == 0 {
		n = AutoShards(j.wf, len(p.Items), j.maxParallel)
	}
	p.Shards = SplitShards(p.Items, n)
	if err := os.MkdirAll(po.Dir, 0o755); err != nil {
		return nil, usage(fmt.Errorf("plan directory: %w", err))
	}
	_ = os.Remove(BaseBundle(po.Dir))
	if base != origin {
		if err := j.git.BundleCreate(ctx, BaseBundle(po.Dir), "refs/heads/"+j.branch, origin); err != nil {
			return nil, err
		}
		p.Bundle = true
	}
	b, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := fsx.WriteFile(PlanFile(po.Dir), append(j.red.JSON(b), '\n'), 0o644); err != nil {
		return nil, fmt.Errorf("write the plan: %w", err)
	}
	return p, nil
}

// SplitShards splits items into n contiguous shards of (almost) equal size
// in input order: the same items and n always give the same shards. n is
// clamped to [1, max(len(items), 1)].
func SplitShards(items []PlanItem, n int) []PlanShard {
	n = max(1, min(n, len(items), MaxShards))
	out := make([]PlanShard, n)
	for k := range out {
		lo, hi := k*len(items)/n, (k+1)*len(items)/n
		out[k] = PlanShard{Shard: k, Items: make([]string, 0, hi-lo)}
		for _, it := range items[lo:hi] {
			out[k].Items = append(out[k].Items, it.ID)
		}
	}
	return out
}

// shardBudget is the part of GitHub's 6-hour job limit a shard plans to
// use (the rest is clone, setup of the runner, upload).
const shardBudget = 5 * time.Hour

// defaultItemTime is the assumed worst case of one attempt when the
// workflow sets no agent_timeout.
const defaultItemTime = 15 * time.Minute

// AutoShards picks a shard count so a shard fits the 6-hour job limit:
// each item is assumed to take its worst case (agent_timeout, else 15
// minutes, per attempt, plus the retry schedule's delays), max_parallel
// at a time. The result is within [1, min(items, 256)].
func AutoShards(wf *config.Workflow, items, maxParallel int) int {
	if items <= 0 {
		return 1
	}
	per := wf.Map.AgentTimeout
	if per <= 0 {
		per = defaultItemTime
	}
	attempts := 1
	var delays time.Duration
	if pol, err := itemPolicy(wf); err == nil {
		attempts = max(1, pol.Attempts)
		delays = pol.WorstCase()
	}
	worst := time.Duration(attempts)*per + delays
	perSlot := max(1, int(shardBudget/worst))
	capacity := perSlot * max(1, maxParallel)
	n := int(math.Ceil(float64(items) / float64(capacity)))
	return max(1, min(n, items, MaxShards))
}

// LoadPlan reads DIR/plan.json.
func LoadPlan(dir string) (*Plan, error) {
	data, err := os.ReadFile(PlanFile(dir))
	if err != nil {
		return nil, usage(fmt.Errorf("read the plan: %w", err))
	}
	var p Plan
	if err := json.Unmarshal(data, &p); err != nil {
		return nil, usage(fmt.Errorf("read the plan %s: %w", PlanFile(dir), err))
	}
	if p.FormatVersion != PlanFormat {
		return nil, usage(fmt.Errorf("plan %s has format %d; this version reads %d", PlanFile(dir), p.FormatVersion, PlanFormat))
	}
	if err := ValidJobID(p.JobID); err != nil {
		return nil, usage(fmt.Errorf("plan %s: %w", PlanFile(dir), err))
	}
	if !isCommitID(p.BaseCommit) {
		return nil, usage(fmt.Errorf("plan %s: base_commit %q is not a commit id", PlanFile(dir), p.BaseCommit))
	}
	return &p, nil
}

// workflow parses the plan's copy of the workflow.
func (p *Plan) workflow(dir string) (*config.Workflow, error) {
	wf, err := config.Parse(filepath.Join(dir, "workflow.yml"), []byte(p.Workflow))
	if err != nil {
		return nil, usage(fmt.Errorf("the plan's workflow: %w", err))
	}
	return wf, nil
}

// ensureBase makes the plan's base commit available in the repository,
// fetching it from DIR/base.bundle into refs/prodigy-base/<job_id> when
// missing.
func (p *Plan) ensureBase(ctx context.Context, git *gitops.Client, dir string) error {
	if git.HasCommit(ctx, p.BaseCommit) {
		return nil
	}
	if !p.Bundle {
		return usage(fmt.Errorf("this repository lacks the plan's base commit %s (clone the planned repository; fetch depth must include it)", short(p.BaseCommit)))
	}
	if err := git.FetchBundle(ctx, BaseBundle(dir), "refs/heads/"+p.ResultsBranch, "refs/prodigy-base/"+p.JobID); err != nil {
		return usage(fmt.Errorf("the plan's base: %w", err))
	}
	if !git.HasCommit(ctx, p.BaseCommit) {
		return usage(fmt.Errorf("base.bundle does not hold the plan's base commit %s", short(p.BaseCommit)))
	}
	return nil
}

// eligibleRecords reads the reprocess-eligible DLQ records of a job.
func eligibleRecords(p Paths) ([]*dlq.DeadLetteredItem, error) {
	store, err := openDLQ(p, dlq.Options{})
	if err != nil {
		return nil, err
	}
	recs := []*dlq.DeadLetteredItem{}
	err = store.Each(func(r dlq.DeadLetteredItem) error {
		if r.ReprocessEligible {
			recs = append(recs, &r)
		}
		return nil
	})
	return recs, err
}

func writeJSONFile(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if err := fsx.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

func isCommitID(s string) bool {
	if len(s) != 40 && len(s) != 64 {
		return false
	}
	for _, c := range s {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

func short(oid string) string {
	if len(oid) > 10 {
		return oid[:10]
	}
	return oid
}
