package runner

import (
	"context"
	"sync"
	"time"

	"github.com/prodigy-action/prodigy-action/config"
	"github.com/prodigy-action/prodigy-action/dlq"
	"github.com/prodigy-action/prodigy-action/gitops"
	"github.com/prodigy-action/prodigy-action/interp"
	"github.com/prodigy-action/prodigy-action/jobstore"
	"github.com/prodigy-action/prodigy-action/redact"
	"github.com/prodigy-action/prodigy-action/retry"
	"github.com/prodigy-action/prodigy-action/runner/agentuser"
	"github.com/prodigy-action/prodigy-action/runner/event"
	"github.com/prodigy-action/prodigy-action/runner/progress"
	"github.com/prodigy-action/prodigy-action/runner/step"
	"github.com/prodigy-action/prodigy-action/runner/worktree"
	"github.com/prodigy-action/prodigy-action/spend"
)

// itemJob is what an item runner tells its job: log lines and warnings, a
// checkpoint write that failed (the job's state error), a reason to start
// nothing more, a DLQ record made obsolete by a success, and the end of an
// item (the job's tallies, its failure-storm breaker and failure
// thresholds). *job implements it.
type itemJob interface {
	logf(format string, args ...any)
	warn(msg string)
	persisted(what string, err error)
	stop(why string)
	clearFromDLQ(itemID string)
	itemEnded(state ItemState)
	itemFailed(itemID string, t dlq.ErrorType, msg, policy string)
}

// itemDeps are an item runner's dependencies: the job's settings it
// reads and the services the job's items share (each safe for concurrent
// use). They are fixed when the map phase starts, after setup's captures,
// and shared by every item runner of the phase.
type itemDeps struct {
	itemJob
	jobID     string
	paths     Paths
	wf        *config.Workflow
	branch    string // the results branch
	parentDir string // its worktree: merges and custom failure handlers
	isolation Isolation
	mergeMode MergeMode
	policy    retry.Policy // the item's attempts and backoff
	agentTO   time.Duration
	baseEnv   []string
	vars      map[string]string // workflow env and setup's captures
	clock     retry.Clock
	rand      func() float64
	red       *redact.Redactor
	redact    func(string) string // red.String
	// halt ends when nothing new may start (the job's halt).
	halt context.Context

	git     *gitops.Client
	steps   *step.Runner
	state   *jobstore.State
	events  *event.Log
	store   *dlq.Store
	trees   *worktree.Pool
	budget  *spend.Budget
	cool    *spend.Cooldown
	prog    *progress.Line
	hooks   Hooks
	mergeMu *sync.Mutex // one worktree merge (or failure handler) at a time in parentDir
	mapSpan Span        // the parent of item spans
	// takeUser returns who an attempt's agent runs as (nil: the engine's
	// user) and gives it back (package runner/agentuser).
	takeUser func(name string) (*agentuser.Identity, func(), error)
}

// itemDeps returns the dependencies of the map phase's item runners.
func (j *job) itemDeps() *itemDeps {
	return &itemDeps{
		itemJob: j, jobID: j.id, paths: j.paths, wf: j.wf, branch: j.branch, parentDir: j.parentDir,
		isolation: j.isolation, mergeMode: j.mergeMode, policy: j.itemPolicy, agentTO: j.agentTO,
		baseEnv: j.baseEnv, vars: j.vars, clock: j.clock, rand: j.rand, red: j.red, redact: j.redact,
		halt: j.haltContext(), git: j.git, steps: j.steps, state: j.state, events: j.events, store: j.store,
		trees: j.trees, budget: j.budget, cool: j.cool, prog: j.prog, hooks: j.hooks, mergeMu: &j.mergeMu,
		mapSpan: j.mapSpan, takeUser: j.agents.Take,
	}
}

func (d *itemDeps) now() time.Time { return d.clock.Now() }

// halted reports whether nothing new may start.
func (d *itemDeps) halted() bool { return d.halt.Err() != nil }

// itemName names an item in log lines: its id and label.
func (d *itemDeps) itemName(it *item) string {
	return itemName(it.row, d.wf.Map.IDField)
}

// total is the number of the job's items.
func (d *itemDeps) total() int { return d.state.Len() }

// baseVars is the interpolation scope every item's starts from.
func (d *itemDeps) baseVars() interp.Vars { return scope(d.vars) }

// itemEnded counts an item that ended in this execution and, for a
// merged one, tells the failure-storm breaker (itemJob).
func (j *job) itemEnded(state ItemState) {
	j.finished.Add(1)
	if state != ItemMerged {
		j.failures.Add(1)
	} else {
		j.breaker.Succeeded()
	}
	j.prog.Finished(state != ItemMerged)
}

// itemFailed feeds an item that failed for good (skipped or in the DLQ)
// to the breaker and the failure thresholds (itemJob).
func (j *job) itemFailed(itemID string, t dlq.ErrorType, msg, policy string) {
	j.observeFailure(itemID, t, msg)
	j.checkThresholds(policy)
}
