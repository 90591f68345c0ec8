package main

import (
	"encoding/json"
	"fmt"
	"io"
	"runtime/debug"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/prodigy-action/prodigy-action/config"
	"github.com/prodigy-action/prodigy-action/retry"
	"github.com/prodigy-action/prodigy-action/runner"
)

func init() { registerCommand("validate", newValidateCommand) }

// validateExtra holds further checks run by `validate` (and `run`) on a
// workflow that parsed cleanly, such as compiling the items pipeline's
// JSONPath, filter and sort_by. A non-empty result makes the file invalid.
var validateExtra []func(*config.Workflow) []error

// validateMemoryLimit is the soft heap limit while validating.
const validateMemoryLimit = 64 << 20

// githubJobLimit is GitHub's maximum job duration on hosted runners.
const githubJobLimit = 6 * time.Hour

// validateReport is the --json output of `validate`.
type validateReport struct {
	Valid            bool         `json:"valid"`
	File             string       `json:"file"`
	Errors           []string     `json:"errors"`
	Warnings         []string     `json:"warnings"`
	Retry            *retryReport `json:"retry"`
	RetryScheduleMS  []int64      `json:"retry_schedule_ms"`
	WorstCaseRetryMS int64        `json:"worst_case_retry_ms"`
	ErrorPolicy      *policyJSON  `json:"error_policy,omitempty"`
	AgentTimeoutMS   int64        `json:"agent_timeout_ms"`
	MaxParallel      string       `json:"max_parallel,omitempty"`
}

// retryReport is a resolved retry config with durations in milliseconds.
type retryReport struct {
	// Source says where the config came from: "workflow", or "default"
	// when on_item_failure: retry uses the defaults.
	Source         string        `json:"source"`
	Attempts       int           `json:"attempts"`
	Backoff        string        `json:"backoff"`
	IncrementMS    int64         `json:"increment_ms,omitempty"`
	Base           float64       `json:"base,omitempty"`
	DelaysMS       []int64       `json:"delays_ms,omitempty"`
	InitialDelayMS int64         `json:"initial_delay_ms"`
	MaxDelayMS     int64         `json:"max_delay_ms"`
	Jitter         bool          `json:"jitter"`
	JitterFactor   float64       `json:"jitter_factor"`
	RetryOn        []matcherJSON `json:"retry_on"`
	RetryBudgetMS  int64         `json:"retry_budget_ms"`
}

type matcherJSON struct {
	Kind    string `json:"kind"`
	Pattern string `json:"pattern,omitempty"`
}

type policyJSON struct {
	OnItemFailure     string  `json:"on_item_failure"`
	ContinueOnFailure bool    `json:"continue_on_failure"`
	MaxFailures       int     `json:"max_failures"`
	FailureThreshold  float64 `json:"failure_threshold"`
}

func newValidateCommand(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "validate WORKFLOW.yml",
		Short: "Check a workflow file and show its resolved retry schedule",
		Long: "Parse and validate a workflow file strictly (unknown keys, wrong types and bad durations are errors\n" +
			"with file:line:col), then print the map phase's retry settings: the wait before each retry and the\n" +
			"worst case with jitter. Exit 0 when valid, 2 when not.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			// Parsing is bounded (config's limits); a soft memory limit keeps
			// the garbage of a large file from growing the heap, and a signal
			// stops validation at once.
			defer debug.SetMemoryLimit(debug.SetMemoryLimit(validateMemoryLimit))
			if cmd.Context().Err() != nil {
				fmt.Fprintln(a.stderr, "validate: interrupted")
				return silentExit(exitInterrupted)
			}
			done := make(chan validateReport, 1)
			go func() { done <- a.validate(args[0]) }()
			var r validateReport
			select {
			case r = <-done:
			case <-cmd.Context().Done():
				fmt.Fprintln(a.stderr, "validate: interrupted")
				return silentExit(exitInterrupted)
			}
			if asJSON {
				enc := json.NewEncoder(a.stdout)
				enc.SetIndent("", "  ")
				if err := enc.Encode(r); err != nil {
					return fmt.Errorf("write result: %w", err)
				}
			} else {
				printValidateReport(a.stdout, a.stderr, r)
			}
			if !r.Valid {
				return silentExit(exitUsage)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object on stdout")
	return cmd
}

// validate parses path and builds the report (never fails: problems are
// listed in the report).
func (a *app) validate(path string) validateReport {
	r := validateReport{File: path, Errors: []string{}, Warnings: []string{}, RetryScheduleMS: []int64{}}
	wf, err := config.Load(path)
	if err != nil {
		for _, e := range config.Errors(err) {
			r.Errors = append(r.Errors, e.Error())
		}
		return r
	}
	for _, check := range validateExtra {
		for _, e := range check(wf) {
			r.Errors = append(r.Errors, e.Error())
		}
	}
	r.Warnings = append(r.Warnings, wf.Warnings...)
	p := wf.ErrorPolicy
	r.ErrorPolicy = &policyJSON{p.OnItemFailure, p.ContinueOnFailure, p.MaxFailures, p.FailureThreshold}
	r.AgentTimeoutMS = wf.Map.AgentTimeout.Milliseconds()
	r.MaxParallel = wf.Map.MaxParallel
	rc, source := p.Retry, "workflow"
	if rc == nil && p.OnItemFailure == config.OnFailureRetry {
		d := runner.DefaultRetryConfig()
		rc, source = &d, "default"
	}
	pol, err := runner.RetryPolicy(rc)
	if err != nil {
		r.Errors = append(r.Errors, fmt.Sprintf("%s: %v", wf.Map.Pos, err))
		return r
	}
	if rc != nil {
		r.Retry = newRetryReport(rc, source)
	}
	for _, d := range pol.Schedule() {
		r.RetryScheduleMS = append(r.RetryScheduleMS, d.Milliseconds())
	}
	worst := pol.WorstCase()
	r.WorstCaseRetryMS = worst.Milliseconds()
	r.Warnings = append(r.Warnings, a.timeoutWarnings(wf, pol, worst)...)
	r.Valid = len(r.Errors) == 0
	return r
}

// timeoutWarnings flags retry schedules that cannot fit: backoff delays
// count toward the agent timeout (seed backoff-strategies.md), and inside
// GitHub Actions the whole item must fit in the 6-hour job limit.
func (a *app) timeoutWarnings(wf *config.Workflow, pol retry.Policy, worst time.Duration) []string {
	var out []string
	timeout := wf.Map.AgentTimeout
	if timeout > 0 && worst > timeout {
		out = append(out, fmt.Sprintf("%s: map: the worst-case retry backoff (%s) exceeds the agent timeout (%s): "+
			"backoff delays count toward the agent timeout, so the last retries can never run",
			wf.Map.Pos, worst, timeout))
	}
	if a.getenv("GITHUB_ACTIONS") == "true" {
		attempts := max(pol.Attempts, 1)
		total := time.Duration(attempts)*timeout + worst
		if total > githubJobLimit {
			out = append(out, fmt.Sprintf("%s: map: one item may take up to %s (%d attempts × agent timeout %s + backoff %s), "+
				"more than GitHub's %s job limit", wf.Map.Pos, total, attempts, timeout, worst, githubJobLimit))
		}
	}
	return out
}

func newRetryReport(rc *config.RetryConfig, source string) *retryReport {
	r := &retryReport{
		Source:         source,
		Attempts:       rc.Attempts,
		Backoff:        rc.Backoff.Kind,
		IncrementMS:    rc.Backoff.Increment.Milliseconds(),
		InitialDelayMS: rc.InitialDelay.Milliseconds(),
		MaxDelayMS:     rc.MaxDelay.Milliseconds(),
		Jitter:         rc.Jitter,
		JitterFactor:   rc.JitterFactor,
		RetryOn:        []matcherJSON{},
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
		r.RetryOn = append(r.RetryOn, matcherJSON(m))
	}
	return r
}

// printValidateReport writes the human form: the verdict and settings to
// out, errors and warnings to errw.
func printValidateReport(out, errw io.Writer, r validateReport) {
	for _, w := range r.Warnings {
		fmt.Fprintf(errw, "warning: %s\n", w)
	}
	if !r.Valid {
		for _, e := range r.Errors {
			fmt.Fprintf(errw, "error: %s\n", e)
		}
		fmt.Fprintf(errw, "%s: invalid (%d problem%s)\n", r.File, len(r.Errors), validatePlural(len(r.Errors)))
		return
	}
	fmt.Fprintf(out, "%s: valid\n", r.File)
	if p := r.ErrorPolicy; p != nil {
		fmt.Fprintf(out, "on_item_failure: %s, continue_on_failure: %t, max_failures: %s, failure_threshold: %s\n",
			p.OnItemFailure, p.ContinueOnFailure, validateOrNone(p.MaxFailures > 0, fmt.Sprint(p.MaxFailures)),
			validateOrNone(p.FailureThreshold > 0, fmt.Sprint(p.FailureThreshold)))
	}
	if r.Retry == nil {
		fmt.Fprintln(out, "map phase retry: none (each item runs once)")
		return
	}
	rc := r.Retry
	fmt.Fprintf(out, "map phase retry (%s): %d attempts, %s, initial_delay %s, max_delay %s, jitter %s, retry_on %s, budget %s\n",
		rc.Source, rc.Attempts, validateBackoffText(rc), validateMS(rc.InitialDelayMS), validateMS(rc.MaxDelayMS),
		validateOnOff(rc.Jitter, fmt.Sprintf("±%g", rc.JitterFactor)), validateMatchersText(rc.RetryOn),
		validateOrNone(rc.RetryBudgetMS > 0, validateMS(rc.RetryBudgetMS)))
	waits := make([]string, len(r.RetryScheduleMS))
	for i, d := range r.RetryScheduleMS {
		waits[i] = validateMS(d)
	}
	fmt.Fprintf(out, "waits before retries 1..%d: %s (worst case: %s)\n",
		len(waits), validateOrNone(len(waits) > 0, strings.Join(waits, ", ")), validateMS(r.WorstCaseRetryMS))
}

func validateBackoffText(rc *retryReport) string {
	switch rc.Backoff {
	case config.BackoffLinear:
		return fmt.Sprintf("linear +%s", validateMS(rc.IncrementMS))
	case config.BackoffExponential:
		return fmt.Sprintf("exponential ×%g", rc.Base)
	case config.BackoffCustom:
		ds := make([]string, len(rc.DelaysMS))
		for i, d := range rc.DelaysMS {
			ds[i] = validateMS(d)
		}
		return fmt.Sprintf("custom [%s] then max_delay", strings.Join(ds, ", "))
	}
	return rc.Backoff
}

func validateMatchersText(list []matcherJSON) string {
	if len(list) == 0 {
		return "every error"
	}
	parts := make([]string, len(list))
	for i, m := range list {
		parts[i] = m.Kind
		if m.Pattern != "" {
			parts[i] = fmt.Sprintf("pattern %q", m.Pattern)
		}
	}
	return strings.Join(parts, ", ")
}

func validateMS(v int64) string { return (time.Duration(v) * time.Millisecond).String() }

func validateOrNone(ok bool, s string) string {
	if ok {
		return s
	}
	return "none"
}

func validateOnOff(on bool, s string) string {
	if on {
		return s
	}
	return "off"
}

func validatePlural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
