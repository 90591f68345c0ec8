package shard

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math"
	mathrand "math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/prodigy-action/prodigy-action/config"
	"github.com/prodigy-action/prodigy-action/dlq"
	"github.com/prodigy-action/prodigy-action/gitops"
	"github.com/prodigy-action/prodigy-action/internal/fsx"
	"github.com/prodigy-action/prodigy-action/jobstore"
	"github.com/prodigy-action/prodigy-action/runner"
	"github.com/prodigy-action/prodigy-action/validate"
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

// PlanSpec is what NewPlan reads: a job planned for shards.
type PlanSpec struct {
	// Workflow, RepoDir, JobID and Branch are as in runner.RunSpec.
	Workflow *config.Workflow
	RepoDir  string
	JobID    string
	Branch   string
	// MaxParallel is each shard's parallelism the automatic shard count
	// assumes; 0 means map.max_parallel.
	MaxParallel int
	// MaxCostUSD is the job's budget, divided among the shards; 0 keeps
	// the workflow's.
	MaxCostUSD float64
	// Dir is the plan directory (created).
	Dir string
	// Shards is the shard count; 0 means auto (see AutoCount).
	Shards int
	// FromDLQ plans only the reprocess-eligible DLQ records of that job
	// instead of the workflow's input: item ids and attempt counts are
	// kept, setup does not run again (its captured values are reused) and
	// the base is that job's results branch when it exists here (else
	// HEAD).
	FromDLQ string
	// FromPending plans the items of that job that are still pending — cut
	// off by a budget, max_failures or a shard closed by a final gather —
	// with their attempt counts, like FromDLQ.
	FromPending string
}

// PlanFile is the plan file inside a plan directory.
func PlanFile(dir string) string { return filepath.Join(dir, "plan.json") }

// BaseBundle is the base bundle inside a plan directory.
func BaseBundle(dir string) string { return filepath.Join(dir, "base.bundle") }

// NewPlan plans a job for shards: it runs setup once, exactly as
// runner.Engine.Run does (a parent worktree on the results branch
// prodigy/<job_id>), loads and selects the items as Run would, splits
// them into shards and writes DIR/plan.json, plus DIR/base.bundle when
// setup made commits. The results branch stays in the repository (at the
// base commit); the job's state is removed, so the gatherer creates it
// afresh. A failed plan leaves nothing behind; planning a job id again
// after a killed plan starts it afresh (runner.Engine.SetupJob).
func NewPlan(ctx context.Context, eng *runner.Engine, s PlanSpec) (*Plan, error) {
	if s.Dir == "" {
		return nil, usage(errors.New("no plan directory given"))
	}
	s.Dir = absPath(s.Dir) // git writes base.bundle from elsewhere: never relative
	if s.Shards < 0 || s.Shards > MaxShards {
		return nil, usage(fmt.Errorf("--shards must be between 1 and %d (or auto)", MaxShards))
	}
	if s.Workflow != nil && s.Workflow.ErrorPolicy.MaxFailures > 0 && s.Shards > s.Workflow.ErrorPolicy.MaxFailures {
		mf := s.Workflow.ErrorPolicy.MaxFailures
		return nil, usage(fmt.Errorf("--shards %d: max_failures (%d) cannot be divided among more shards than it allows failures (each shard stops at its part, at least 1): use --shards %d or fewer", s.Shards, mf, mf))
	}
	if s.FromDLQ != "" && s.FromPending != "" {
		return nil, usage(errors.New("--from-dlq and --from-pending exclude each other: plan one, then the other"))
	}
	var redrive []*dlq.DeadLetteredItem
	var pendingItems []PlanItem
	var from *jobstore.Checkpoint
	if src := s.FromDLQ + s.FromPending; src != "" {
		p, err := findJob(eng.Home, src)
		if err != nil {
			return nil, err
		}
		if from, err = jobstore.LoadCheckpoint(p); err != nil {
			return nil, err
		}
		if s.FromDLQ != "" {
			if redrive, err = eligibleRecords(p); err != nil {
				return nil, err
			}
		} else if pendingItems, err = pendingPlanItems(p, from); err != nil {
			return nil, err
		}
	}
	ss := runner.SetupSpec{Workflow: s.Workflow, RepoDir: s.RepoDir, JobID: s.JobID, Branch: s.Branch, MaxParallel: s.MaxParallel, MaxCostUSD: s.MaxCostUSD}
	if from != nil {
		// A redrive builds on the earlier job's results (setup already ran there).
		ss.Start = from.ResultsBranch
	}
	j, err := eng.SetupJob(ctx, ss)
	if err != nil {
		return nil, err
	}
	defer j.Close()
	plan, err := writePlan(ctx, eng, j, s, redrive, pendingItems, from)
	if err != nil {
		j.Discard()
		return nil, err
	}
	j.Release(ctx)
	j.Logf("plan %s: %d item(s) in %d shard(s); base %s on %s", plan.JobID, len(plan.Items), len(plan.Shards), short(plan.BaseCommit), plan.ResultsBranch)
	return plan, nil
}

// writePlan runs setup and item loading and writes the plan directory.
// from is the redriven job's checkpoint (nil unless --from-dlq or
// --from-pending): then setup does not run again and its captured values
// are reused.
func writePlan(ctx context.Context, eng *runner.Engine, j *runner.Job, s PlanSpec, redrive []*dlq.DeadLetteredItem, pendingItems []PlanItem, from *jobstore.Checkpoint) (*Plan, error) {
	// A plan.json left by an interrupted earlier attempt must not outlive
	// the job state it was made with.
	if err := os.Remove(PlanFile(s.Dir)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, usage(fmt.Errorf("plan directory: %w", err))
	}
	if err := j.Setup(ctx, from); err != nil {
		return nil, err
	}
	git := j.Git()
	base, err := git.ResolveRef(ctx, "refs/heads/"+j.Branch())
	if err != nil {
		return nil, err
	}
	wf := s.Workflow
	var planSpend float64
	var list []*jobstore.CheckpointItem
	p := &Plan{
		FormatVersion: PlanFormat, JobID: j.ID(), BaseCommit: base, OriginCommit: j.Origin(), ResultsBranch: j.Branch(),
		WorkflowName: wf.Name, FromDLQ: s.FromDLQ, FromPending: s.FromPending, Items: []PlanItem{},
		MaxFailures: wf.ErrorPolicy.MaxFailures, TraceParent: j.TraceParent(),
	}
	rerr := j.ReadCheckpoint(func(cp *jobstore.Checkpoint) {
		p.MaxParallel = cp.MaxParallel
		if cp.BudgetUSD > 0 {
			p.MaxCostUSD, planSpend = cp.BudgetUSD, cp.JobCost()
		}
		p.Vars = maps.Clone(cp.Vars)
		if p.Vars == nil {
			p.Vars = map[string]string{}
		}
		list = slices.Clone(cp.Items)
	})
	if rerr != nil {
		return nil, rerr
	}
	red := j.Redactor()
	if data, err := os.ReadFile(wf.Path); err == nil {
		p.Workflow = string(red.Bytes(data))
	} else {
		return nil, usage(fmt.Errorf("read the workflow: %w", err))
	}
	for _, it := range list {
		data, err := j.ItemData(it)
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
	n := s.Shards
	if n == 0 {
		n = AutoCount(wf, len(p.Items), p.MaxParallel)
		if mf := wf.ErrorPolicy.MaxFailures; mf > 0 {
			n = min(n, mf) // each shard's part is at least 1
		}
	}
	p.Shards = Split(p.Items, n)
	divideLimits(p, planSpend)
	// The id must differ between any two plans, also two of the same job
	// and content made at the same (injected) time: 128 random bits from
	// the system, whatever the engine's injected randomness.
	var nonce [16]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		return nil, fmt.Errorf("plan id: %w", err)
	}
	rnd := eng.Rand
	if rnd == nil {
		rnd = mathrand.Float64
	}
	if p.PlanID, err = newPlanID(p, fmt.Sprintf("%d/%v/%x", j.Now().UnixNano(), rnd(), nonce)); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(s.Dir, 0o755); err != nil {
		return nil, usage(fmt.Errorf("plan directory: %w", err))
	}
	_ = os.Remove(BaseBundle(s.Dir))
	if base != p.OriginCommit {
		if err := git.BundleCreate(ctx, BaseBundle(s.Dir), "refs/heads/"+j.Branch(), p.OriginCommit); err != nil {
			return nil, err
		}
		p.Bundle = true
	}
	b, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := fsx.WriteFile(PlanFile(s.Dir), append(red.JSON(b), '\n'), 0o644); err != nil {
		return nil, fmt.Errorf("write the plan: %w", err)
	}
	return p, nil
}

// Split splits items into n contiguous shards of (almost) equal size in
// input order: the same items and n always give the same shards. n is
// clamped to [1, max(len(items), 1)].
func Split(items []PlanItem, n int) []PlanShard {
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
// NewPlan keeps N at most max_failures, so no part is 0 — a part below 1
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

// AutoCount picks a shard count so a shard fits the 6-hour job limit:
// each item is assumed to take its worst case (agent_timeout, else 15
// minutes, per attempt, plus the retry schedule's delays), max_parallel
// at a time. The result is within [1, min(items, 256)].
func AutoCount(wf *config.Workflow, items, maxParallel int) int {
	if items <= 0 {
		return 1
	}
	per := wf.Map.AgentTimeout
	if per <= 0 {
		per = defaultItemTime
	}
	attempts := 1
	var delays time.Duration
	rc, _ := validate.ItemRetryConfig(wf.ErrorPolicy)
	if pol, err := validate.RetryPolicy(rc); err == nil {
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
	if err := jobstore.ValidJobID(p.JobID); err != nil {
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
func pendingPlanItems(p jobstore.Paths, cp *jobstore.Checkpoint) ([]PlanItem, error) {
	r := jobstore.NewItemDataReader(p)
	defer r.Close()
	var out []PlanItem
	for _, it := range cp.Items {
		if it.State != jobstore.ItemPending && it.State != jobstore.ItemRunning {
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
func eligibleRecords(p jobstore.Paths) ([]*dlq.DeadLetteredItem, error) {
	store, err := dlq.Open(p.DLQRoot(), p.JobID, dlq.Options{})
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

// usage marks err as a usage, config or input error (runner.UsageError):
// nothing was run.
func usage(err error) error { return &runner.UsageError{Err: err} }

// absPath is p made absolute ("" stays "").
func absPath(p string) string {
	if p == "" {
		return ""
	}
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}

// findJob locates a job by id (jobstore.FindJob); a job that does not
// exist, an ambiguous or an invalid id is a *runner.UsageError.
func findJob(home, jobID string) (jobstore.Paths, error) {
	p, err := jobstore.FindJob(home, "", jobID)
	if errors.Is(err, jobstore.ErrNoJob) || errors.Is(err, jobstore.ErrAmbiguousJob) || errors.Is(err, jobstore.ErrInvalidJobID) {
		return p, usage(err)
	}
	return p, err
}
