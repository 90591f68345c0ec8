package runner

import (
	"errors"
	"fmt"
	"time"

	"github.com/prodigy-action/prodigy-action/claudecode"
	"github.com/prodigy-action/prodigy-action/config"
	"github.com/prodigy-action/prodigy-action/items"
	"github.com/prodigy-action/prodigy-action/retry"
)

// GitHubJobLimit is GitHub's maximum job duration on hosted runners.
const GitHubJobLimit = 6 * time.Hour

// Retry config sources (ResolvedRetry.Source).
const (
	// RetrySourceWorkflow: the workflow gives a retry config.
	RetrySourceWorkflow = "workflow"
	// RetrySourceDefault: `on_item_failure: retry` without a retry config
	// uses config.DefaultRetryConfig.
	RetrySourceDefault = "default"
)

// ValidateOptions configures Validate.
type ValidateOptions struct {
	// GitHubActions adds the check that one item fits in GitHub's job
	// limit (set when running inside GitHub Actions).
	GitHubActions bool
	// ClaudeCommand, ClaudeArgs and Claude are what run would use for
	// claude steps (see options); they only shape ClaudeSteps.
	ClaudeCommand string
	ClaudeArgs    []string
	Claude        config.ClaudeSettings
}

// Validation is the one analysis of a workflow file that `run`,
// `validate` and the GitHub Action share: whether it can run, and the map
// phase's resolved retry policy with its schedule and worst case. Its JSON
// form is the output of `validate --json` (a CLI contract); durations are in
// milliseconds.
type Validation struct {
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

// ResolvedRetry is a resolved retry config with durations in milliseconds.
type ResolvedRetry struct {
	// Source is RetrySourceWorkflow or RetrySourceDefault.
	Source         string           `json:"source"`
	Attempts       int              `json:"attempts"`
	Backoff        string           `json:"backoff"`
	IncrementMS    int64            `json:"increment_ms,omitempty"`
	Base           float64          `json:"base,omitempty"`
	DelaysMS       []int64          `json:"delays_ms,omitempty"`
	InitialDelayMS int64            `json:"initial_delay_ms"`
	MaxDelayMS     int64            `json:"max_delay_ms"`
	Jitter         bool             `json:"jitter"`
	JitterFactor   float64          `json:"jitter_factor"`
	RetryOn        []RetryOnMatcher `json:"retry_on"`
	RetryBudgetMS  int64            `json:"retry_budget_ms"`
}

// RetryOnMatcher is one retry_on entry: a kind, or a pattern.
type RetryOnMatcher struct {
	Kind    string `json:"kind"`
	Pattern string `json:"pattern,omitempty"`
}

// PolicySummary is the workflow's on-failure policy.
type PolicySummary struct {
	OnItemFailure     string  `json:"on_item_failure"`
	ContinueOnFailure bool    `json:"continue_on_failure"`
	MaxFailures       int     `json:"max_failures"`
	FailureThreshold  float64 `json:"failure_threshold"`
	CircuitBreaker    int     `json:"circuit_breaker"`
}

// Err returns nil for a valid workflow, else a *UsageError with the first
// problem (for a file that did not parse, the config error listing them all).
func (v Validation) Err() error {
	switch {
	case v.err != nil:
		return usage(v.err)
	case !v.Valid:
		return usage(errors.New(v.File + ": invalid workflow"))
	}
	return nil
}

// ItemRetryConfig is the rule for the map items' retry config: the
// workflow's, else the defaults for `on_item_failure: retry`, else nil (each
// item runs once). source says which.
func ItemRetryConfig(p config.ErrorPolicy) (rc *config.RetryConfig, source string) {
	if p.Retry == nil && p.OnItemFailure == config.OnFailureRetry {
		d := config.DefaultRetryConfig()
		return &d, RetrySourceDefault
	}
	return p.Retry, RetrySourceWorkflow
}

// ItemOptions maps a workflow's map phase to the items pipeline; dir and
// env are where an input command runs (empty for checks).
func ItemOptions(wf *config.Workflow, dir string, env []string) items.Options {
	m := wf.Map
	return items.Options{
		Input: m.Input, JSONPath: m.JSONPath, Filter: m.Filter, SortBy: m.SortBy,
		Distinct: m.Distinct, IDField: m.IDField, Offset: m.Offset, MaxItems: m.MaxItems, Dir: dir, Env: env,
	}
}

// ValidateFile loads the workflow at path and validates it. It never
// fails: problems are listed in the result (see Validation.Err).
func ValidateFile(path string, o ValidateOptions) Validation {
	wf, err := config.Load(path)
	if err != nil {
		v := newValidation(path)
		for _, e := range config.Errors(err) {
			v.Errors = append(v.Errors, e.Error())
		}
		v.err = err
		return v
	}
	return Validate(wf, o)
}

// Validate checks what config.Parse leaves to other packages (the items
// pipeline's JSONPath, filter and sort_by; the retry config) and resolves
// the map phase's retry policy, its waits and worst case. Warnings flag
// retry schedules that cannot fit: backoff delays count toward the agent
// timeout (seed backoff-strategies.md), and with GitHubActions the whole
// item must fit in GitHubJobLimit.
func Validate(wf *config.Workflow, o ValidateOptions) Validation {
	v := newValidation(wf.Path)
	v.Workflow = wf
	for _, err := range checkItemsPipeline(wf) {
		v.fail(err)
	}
	// Placeholder mistakes (unknown variables, ${map.*} outside reduce,
	// unsafe shell contexts, quoted here-documents) are found before
	// anything runs, by validate, run and the Action alike.
	for _, err := range CheckInterpolation(wf) {
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

// ClaudeStep is one claude step of a workflow and the Claude Code command
// line it runs.
type ClaudeStep struct {
	// Where is "setup", "map", "reduce" or "on_item_failure", with
	// " on_failure" for a step's handler.
	Where    string   `json:"where"`
	Position string   `json:"position"`
	Command  []string `json:"command"`
}

// claudeSteps lists every claude step of wf (handlers included) with its
// resolved command line.
func claudeSteps(wf *config.Workflow, o ValidateOptions) []ClaudeStep {
	command := o.ClaudeCommand
	if command == "" {
		command = "claude"
	}
	var out []ClaudeStep
	var walk func(where string, steps []config.Step)
	walk = func(where string, steps []config.Step) {
		for _, st := range steps {
			if st.Claude != "" {
				out = append(out, ClaudeStep{Where: where, Position: st.Pos.String(), Command: claudecode.Command{Path: command, Args: o.ClaudeArgs, Workflow: wf.Claude, Overrides: o.Claude}.Line(st)})
			}
			walk(where+" on_failure", st.OnFailure)
		}
	}
	walk("setup", wf.Setup)
	walk("map", wf.Map.AgentTemplate)
	walk("on_item_failure", wf.ErrorPolicy.CustomHandler)
	walk("reduce", wf.Reduce)
	return out
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

func newValidation(file string) Validation {
	return Validation{File: file, Errors: []string{}, Warnings: []string{}, RetryScheduleMS: []int64{}}
}

func (v *Validation) fail(err error) {
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

func resolvedRetry(rc *config.RetryConfig, source string) *ResolvedRetry {
	r := &ResolvedRetry{
		Source:         source,
		Attempts:       rc.Attempts,
		Backoff:        rc.Backoff.Kind,
		IncrementMS:    rc.Backoff.Increment.Milliseconds(),
		InitialDelayMS: rc.InitialDelay.Milliseconds(),
		MaxDelayMS:     rc.MaxDelay.Milliseconds(),
		Jitter:         rc.Jitter,
		JitterFactor:   rc.JitterFactor,
		RetryOn:        []RetryOnMatcher{},
		RetryBudgetMS:  rc.RetryBudget.Milliseconds(),
	}
	if rc.Backoff.Kind == config.BackoffExponential {
		r.Base = rc.Backoff.Base
	}
	if rc.Backoff.Kind == config.BackoffCustom {
		r.DelaysMS = []int64{}
		for _, d := range rc.Backoff.Delays {
			r.DelaysMS = append(r.DelaysMS, d.Milliseconds())
		}
	}
	for _, m := range rc.RetryOn {
		r.RetryOn = append(r.RetryOn, RetryOnMatcher(m))
	}
	return r
}
