package runner

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
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

// PlanFormat is the format_version of plan.json (2: plan_id, trace_parent
// and the shards' limits).
const PlanFormat = 2

// MaxShards is the largest shard count (a GitHub Actions matrix holds at
// most 256 jobs).
const MaxShards = 256

// Plan is DIR/plan.json: everything a shard runner and the gatherer need
// besides the repository itself.
type Plan struct {
	FormatVersion int    `json:"format_version"`
	JobID         string `json:"job_id"`
	// PlanID identifies this plan: every shard output carries it, and
	// gather refuses outputs of any other plan (of the same job id too).
	PlanID string `json:"plan_id"`
	// TraceParent is the W3C traceparent of the plan's job span when it
	// was traced: shards and gather join that trace as its children.
	TraceParent string `json:"trace_parent,omitempty"`
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
	// FromPending is the job whose pending items this plan continues.
	FromPending string `json:"from_pending,omitempty"`
	// MaxFailures and MaxCostUSD are the job-wide limits the shards'
	// limits are divided from (0: none).
	MaxFailures int     `json:"max_failures,omitempty"`
	MaxCostUSD  float64 `json:"max_cost_usd,omitempty"`
}

// PlanShard lists the item ids of one shard, in input order.
type PlanShard struct {
	Shard int      `json:"shard"`
	Items []string `json:"items"`
	// MaxFailures is the shard's part of the job's max_failures: the
	// shards' parts add up to it (see divideLimits). 0: no limit.
	MaxFailures int `json:"max_failures,omitempty"`
	// MaxCostUSD is the shard's part of the job's budget (max_cost_usd):
	// the parts add up to at most the job's. 0: no budget.
	MaxCostUSD float64 `json:"max_cost_usd,omitempty"`
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

// planOptions configures planJob: Run carries the job settings
// (Workflow, RepoDir, Home, JobID, MaxParallel, Stderr, …), the other
// fields are PlanSpec's.
type planOptions struct {
	Run         options
	Dir         string
	Shards      int
	FromDLQ     string
	FromPending string
}

// PlanFile is the plan file inside a plan directory.
func PlanFile(dir string) string { return filepath.Join(dir, "plan.json") }

// BaseBundle is the base bundle inside a plan directory.
func BaseBundle(dir string) string { return filepath.Join(dir, "base.bundle") }

// planJob runs setup once, exactly as Run does (a parent worktree on the
// results branch prodigy/<job_id>), loads and selects the items as Run
// would, splits them into shards and writes DIR/plan.json, plus
// DIR/base.bundle when setup made commits. The results branch stays in the
// repository (at the base commit); the job's state is removed, so the
// gatherer creates it afresh. A failed plan leaves nothing behind.
func planJob(ctx context.Context, po planOptions) (*Plan, error) {
	o := po.Run
	o.defaults()
	if po.Dir == "" {
		return nil, usage(errors.New("no plan directory given"))
	}
	po.Dir = absPath(po.Dir) // git writes base.bundle from elsewhere: never relative
	if po.Shards < 0 || po.Shards > MaxShards {
		return nil, usage(fmt.Errorf("--shards must be between 1 and %d (or auto)", MaxShards))
	}
	if o.Workflow != nil && o.Workflow.ErrorPolicy.MaxFailures > 0 && po.Shards > o.Workflow.ErrorPolicy.MaxFailures {
		mf := o.Workflow.ErrorPolicy.MaxFailures
		return nil, usage(fmt.Errorf("--shards %d: max_failures (%d) cannot be divided among more shards than it allows failures (each shard stops at its part, at least 1): use --shards %d or fewer", po.Shards, mf, mf))
	}
	if po.FromDLQ != "" && po.FromPending != "" {
		return nil, usage(errors.New("--from-dlq and --from-pending exclude each other: plan one, then the other"))
	}
	var redrive []*dlq.DeadLetteredItem
	var pendingItems []PlanItem
	var from *jobstore.Checkpoint
	if src := po.FromDLQ + po.FromPending; src != "" {
		p, err := findJob(o.Home, "", src)
		if err != nil {
			return nil, err
		}
		if from, err = jobstore.LoadCheckpoint(p); err != nil {
			return nil, err
		}
		if po.FromDLQ != "" {
			if redrive, err = eligibleRecords(p); err != nil {
				return nil, err
			}
		} else if pendingItems, err = pendingPlanItems(p, from); err != nil {
			return nil, err
		}
	}
	if err := discardInterruptedPlan(ctx, &o); err != nil {
		return nil, err
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
	if err := jobstore.MarkPlanning(j.paths); err != nil {
		return nil, err
	}
	if err := j.create(ctx, &o, start); err != nil {
		j.rollback()
		return nil, err
	}
	plan, err := j.plan(ctx, po, head, redrive, pendingItems, from)
	if err != nil {
		j.rollback()
		return nil, err
	}
	j.endJobSpan(SpanEnd{Outcome: "planned"})
	j.events.close()
	fault(ctx, FaultPlanWritten, j.id)
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
func (j *job) plan(ctx context.Context, po planOptions, origin string, redrive []*dlq.DeadLetteredItem, pendingItems []PlanItem, from *jobstore.Checkpoint) (*Plan, error) {
	// A plan.json left by an interrupted earlier attempt must not outlive
	// the job state it was made with.
	if err := os.Remove(PlanFile(absPath(po.Dir))); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, usage(fmt.Errorf("plan directory: %w", err))
	}
	runCtx, stopGrace := j.graceContext(ctx)
	defer stopGrace()
	if from == nil {
		if err := j.setup(runCtx); err != nil {
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
		WorkflowName: j.wf.Name, MaxParallel: j.maxParallel, FromDLQ: po.FromDLQ, FromPending: po.FromPending, Items: []PlanItem{},
		MaxFailures: j.wf.ErrorPolicy.MaxFailures, TraceParent: spanTraceParent(j.span),
	}
	var planSpend float64
	if j.budget != nil && j.budget.Max() > 0 {
		p.MaxCostUSD = j.budget.Max()
		j.state.Read(func(cp *jobstore.Checkpoint) { planSpend = cp.JobCost() })
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
	p.Items = append(p.Items, pendingItems...)
	n := po.Shards
	if n == 0 {
		n = AutoShards(j.wf, len(p.Items), j.maxParallel)
		if mf := j.wf.ErrorPolicy.MaxFailures; mf > 0 {
			n = min(n, mf) // each shard's part is at least 1
		}
	}
	p.Shards = SplitShards(p.Items, n)
	divideLimits(p, planSpend)
	// The id must differ between any two plans, also two of the same job
	// and content made at the same (injected) time: 128 random bits from
	// the system, whatever the job's injected randomness.
	var nonce [16]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		return nil, fmt.Errorf("plan id: %w", err)
	}
	if p.PlanID, err = newPlanID(p, fmt.Sprintf("%d/%v/%x", j.now().UnixNano(), j.rand(), nonce)); err != nil {
		return nil, err
	}
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

// divideLimits gives every shard its part of the job-wide limits, so the
// shards together never exceed them: max_failures is split into integer
// parts that add up to it (the first max_failures%N shards get one more;
// planJob keeps N at most max_failures, so no part is 0 — a part below 1
// is raised to 1, the smallest stop there is). The budget left after
// setup (max_cost_usd minus what planning spent) is split evenly, rounded
// down to the cent.
func divideLimits(p *Plan, spent float64) {
	n := len(p.Shards)
	if n == 0 {
		return
	}
	if mf := p.MaxFailures; mf > 0 {
		for k := range p.Shards {
			part := mf / n
			if k < mf%n {
				part++
			}
			p.Shards[k].MaxFailures = max(part, 1)
		}
	}
	if p.MaxCostUSD > 0 {
		part := math.Floor(100*max(p.MaxCostUSD-spent, 0)/float64(n)) / 100
		for k := range p.Shards {
			// A zero part would mean "no budget": the smallest one stops
			// the shard before its first reservation instead.
			p.Shards[k].MaxCostUSD = max(part, 0.0001)
		}
	}
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

// MaxPlanBytes bounds plan.json (it holds every item's data; a plan
// directory is an artifact like a shard output).
const MaxPlanBytes = 2 << 30

// LoadPlan reads DIR/plan.json (a regular file of at most MaxPlanBytes).
func LoadPlan(dir string) (*Plan, error) {
	data, err := readLimited(PlanFile(dir), MaxPlanBytes)
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

// pendingPlanItems are the items of the job at p still pending (or
// running when it stopped), with their data and attempt counts.
func pendingPlanItems(p Paths, cp *jobstore.Checkpoint) ([]PlanItem, error) {
	r := jobstore.NewItemDataReader(p)
	defer r.Close()
	var out []PlanItem
	for _, it := range cp.Items {
		if it.State != ItemPending && it.State != ItemRunning {
			continue
		}
		data, err := r.Data(it)
		if err != nil {
			return nil, err
		}
		out = append(out, PlanItem{ID: it.ItemID, Index: it.Index, Data: data, Attempts: it.Attempts})
	}
	if len(out) == 0 {
		return nil, usage(fmt.Errorf("job %s has no pending items to plan", cp.JobID))
	}
	return out, nil
}

// eligibleRecords reads the reprocess-eligible DLQ records of a job.
func eligibleRecords(p Paths) ([]*dlq.DeadLetteredItem, error) {
	store, err := openDLQ(p, dlq.Options{})
	if err != nil {
		return nil, err
	}
	defer store.Close() // read only: nothing to flush
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
