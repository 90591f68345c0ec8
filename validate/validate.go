package validate

import (
	"errors"
	"fmt"
	"time"

	"github.com/prodigy-action/prodigy-action/config"
	"github.com/prodigy-action/prodigy-action/items"
	"github.com/prodigy-action/prodigy-action/retry"
)

// GitHubJobLimit is GitHub's maximum job duration on hosted runners.
const GitHubJobLimit = 6 * time.Hour

// Options configures Workflow and File.
type Options struct {
	// GitHubActions adds the check that one item fits in GitHub's job
	// limit (set when running inside GitHub Actions).
	GitHubActions bool
	// ClaudeCommand ("" is "claude"), ClaudeArgs and Claude are what run
	// would use for claude steps (the engine's ClaudeCommand, ClaudeArgs
	// and Agents.Claude); they only shape ClaudeSteps.
	ClaudeCommand string
	ClaudeArgs    []string
	Claude        config.ClaudeSettings
}

// Result is the one analysis of a workflow file that `run`, `validate`
// and the GitHub Action share: whether it can run, and the map phase's
// resolved retry policy with its schedule and worst case. Its JSON form is
// the output of `validate --json` (a CLI contract); durations are in
// milliseconds.
type Result struct {
	Valid            bool           `json:"valid"`
	File             string         `json:"file"`
	Errors           []string       `json:"errors"`
	Warnings         []string       `json:"warnings"`
	Retry            *ResolvedRetry `json:"retry"`
	RetryScheduleMS  []int64        `json:"retry_schedule_ms"`
	WorstCaseRetryMS int64          `json:"worst_case_retry_ms"`
	ErrorPolicy      *PolicySummary `json:"error_policy,omitempty"`
	AgentTimeoutMS   int64          `json:"agent_timeout_ms"`
	MaxParallel      string         `json:"max_parallel,omitempty"`
	// ClaudeSteps are the claude steps with the resolved Claude Code
	// command line each runs (the prompt shown as <prompt>).
	ClaudeSteps []ClaudeStep `json:"claude_steps,omitempty"`

	// Workflow is the parsed workflow; nil when the file did not parse.
	Workflow *config.Workflow `json:"-"`
	// Policy is the resolved retry policy of map items.
	Policy retry.Policy `json:"-"`
	// err is the first problem as an error (the config.Load error with all
	// its positions, else the first further check).
	err error
}

// PolicySummary is the workflow's on-failure policy.
type PolicySummary struct {
	OnItemFailure     string  `json:"on_item_failure"`
	ContinueOnFailure bool    `json:"continue_on_failure"`
	MaxFailures       int     `json:"max_failures"`
	FailureThreshold  float64 `json:"failure_threshold"`
	CircuitBreaker    int     `json:"circuit_breaker"`
}

// Err returns nil for a valid workflow, else an *Error with the first
// problem (for a file that did not parse, the config error listing them all).
func (v Result) Err() error {
	switch {
	case v.err != nil:
		return &Error{Err: v.err}
	case !v.Valid:
		return &Error{Err: errors.New(v.File + ": invalid workflow")}
	}
	return nil
}

// Error is the error of a workflow that is not valid (Result.Err): a
// config or input error, found before anything ran. runner.ExitCode maps it
// to exit 2, as it does runner.UsageError.
type Error struct{ Err error }

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// ItemOptions maps a workflow's map phase to the items pipeline; dir and
// env are where an input command runs (empty for checks).
func ItemOptions(wf *config.Workflow, dir string, env []string) items.Options {
	m := wf.Map
	return items.Options{
		Input: m.Input, JSONPath: m.JSONPath, Filter: m.Filter, SortBy: m.SortBy,
		Distinct: m.Distinct, IDField: m.IDField, Offset: m.Offset, MaxItems: m.MaxItems, Dir: dir, Env: env,
	}
}

// File loads the workflow at path and validates it (Workflow). It never
// fails: problems are listed in the result (see Result.Err).
func File(path string, o Options) Result {
	wf, err := config.Load(path)
	if err != nil {
		v := newResult(path)
		for _, e := range config.Errors(err) {
			v.Errors = append(v.Errors, e.Error())
		}
		v.err = err
		return v
	}
	return Workflow(wf, o)
}

// Workflow checks what config.Parse leaves to other packages (the items
// pipeline's JSONPath, filter and sort_by; the retry config) and resolves
// the map phase's retry policy, its waits and worst case. Warnings flag
// retry schedules that cannot fit: backoff delays count toward the agent
// timeout (seed backoff-strategies.md), and with GitHubActions the whole
// item must fit in GitHubJobLimit.
func Workflow(wf *config.Workflow, o Options) Result {
	v := newResult(wf.Path)
	v.Workflow = wf
	for _, err := range checkItemsPipeline(wf) {
		v.fail(err)
	}
	// Placeholder mistakes (unknown variables, ${map.*} outside reduce,
	// unsafe shell contexts, quoted here-documents) are found before
	// anything runs, by validate, run and the Action alike.
	for _, err := range Interpolation(wf) {
		v.fail(err)
	}
	v.Warnings = append(v.Warnings, wf.Warnings...)
	p := wf.ErrorPolicy
	v.ErrorPolicy = &PolicySummary{p.OnItemFailure, p.ContinueOnFailure, p.MaxFailures, p.FailureThreshold, p.CircuitBreaker}
	v.AgentTimeoutMS = wf.Map.AgentTimeout.Milliseconds()
	v.MaxParallel = wf.Map.MaxParallel
	rc, source := ItemRetryConfig(p)
	pol, err := RetryPolicy(rc)
	if err != nil {
		v.fail(fmt.Errorf("%s: %w", wf.Map.Pos, err))
		v.Valid = false
		return v
	}
	v.Policy = pol
	if rc != nil {
		v.Retry = resolvedRetry(rc, source)
	}
	for _, d := range pol.Schedule() {
		v.RetryScheduleMS = append(v.RetryScheduleMS, d.Milliseconds())
	}
	worst := pol.WorstCase()
	v.WorstCaseRetryMS = worst.Milliseconds()
	v.Warnings = append(v.Warnings, timeoutWarnings(wf, pol, worst, o.GitHubActions)...)
	v.ClaudeSteps = claudeSteps(wf, o)
	v.Valid = len(v.Errors) == 0
	return v
}

// checkItemsPipeline compiles the items pipeline options (json_path,
// filter, sort_by, distinct, …) without reading the input; a filter
// problem is reported at its column in the file.
func checkItemsPipeline(wf *config.Workflow) []error {
	var errs []error
	opts := ItemOptions(wf, "", nil)
	if _, err := items.CompileFilter(opts.Filter); opts.Filter != "" && err != nil {
		pos := wf.Map.FilterPos
		var fe *items.FilterError
		if errors.As(err, &fe) && fe.Column > 0 && pos.Line > 0 {
			pos.Col += fe.Column - 1
		}
		errs = append(errs, fmt.Errorf("%s: map.filter: %w", pos, err))
		opts.Filter = ""
	}
	if err := items.Check(opts); err != nil {
		errs = append(errs, fmt.Errorf("%s: map: %w", wf.Map.Pos, err))
	}
	return errs
}

func newResult(file string) Result {
	return Result{File: file, Errors: []string{}, Warnings: []string{}, RetryScheduleMS: []int64{}}
}

func (v *Result) fail(err error) {
	v.Errors = append(v.Errors, err.Error())
	if v.err == nil {
		v.err = err
	}
}

func timeoutWarnings(wf *config.Workflow, pol retry.Policy, worst time.Duration, gha bool) []string {
	var out []string
	timeout := wf.Map.AgentTimeout
	if timeout > 0 && worst > timeout {
		out = append(out, fmt.Sprintf("%s: map: the worst-case retry backoff (%s) exceeds the agent timeout (%s): "+
			"backoff delays count toward the agent timeout, so the last retries can never run",
			wf.Map.Pos, worst, timeout))
	}
	if gha {
		attempts := max(pol.Attempts, 1)
		total := time.Duration(attempts)*timeout + worst
		if total > GitHubJobLimit {
			out = append(out, fmt.Sprintf("%s: map: one item may take up to %s (%d attempts × agent timeout %s + backoff %s), "+
				"more than GitHub's %s job limit", wf.Map.Pos, total, attempts, timeout, worst, GitHubJobLimit))
		}
	}
	return out
}
