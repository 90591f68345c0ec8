package report

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/prodigy-action/prodigy-action/validate"
)

// WriteValidation writes the human form of `validate`: the verdict and
// resolved settings to out, warnings and errors to errw.
func WriteValidation(out, errw io.Writer, v validate.Result) {
	for _, w := range v.Warnings {
		fmt.Fprintf(errw, "warning: %s\n", w)
	}
	if !v.Valid {
		for _, e := range v.Errors {
			fmt.Fprintf(errw, "error: %s\n", e)
		}
		fmt.Fprintf(errw, "%s: invalid (%d problem%s)\n", v.File, len(v.Errors), plural(len(v.Errors)))
		return
	}
	fmt.Fprintf(out, "%s: valid\n", v.File)
	for _, c := range v.ClaudeSteps {
		fmt.Fprintf(out, "claude step (%s, %s): %s\n", c.Where, c.Position, shellQuote(c.Command))
	}
	if p := v.ErrorPolicy; p != nil {
		fmt.Fprintf(out, "on_item_failure: %s, continue_on_failure: %t, max_failures: %s, failure_threshold: %s, circuit_breaker: %s\n",
			p.OnItemFailure, p.ContinueOnFailure, orNone(p.MaxFailures > 0, fmt.Sprint(p.MaxFailures)),
			orNone(p.FailureThreshold > 0, fmt.Sprint(p.FailureThreshold)), orNone(p.CircuitBreaker > 0, fmt.Sprintf("%d consecutive", p.CircuitBreaker)))
	}
	if v.Retry == nil {
		fmt.Fprintln(out, "map phase retry: none (each item runs once)")
		return
	}
	rc := v.Retry
	jitter := "off"
	if rc.Jitter {
		jitter = fmt.Sprintf("±%g", rc.JitterFactor)
	}
	fmt.Fprintf(out, "map phase retry (%s): %d attempts, %s, initial_delay %s, max_delay %s, jitter %s, retry_on %s, budget %s\n",
		rc.Source, rc.Attempts, backoffText(rc), ms(rc.InitialDelayMS), ms(rc.MaxDelayMS), jitter,
		matchersText(rc.RetryOn), orNone(rc.RetryBudgetMS > 0, ms(rc.RetryBudgetMS)))
	waits := make([]string, len(v.RetryScheduleMS))
	for i, d := range v.RetryScheduleMS {
		waits[i] = ms(d)
	}
	fmt.Fprintf(out, "waits before retries 1..%d: %s (worst case: %s)\n",
		len(waits), orNone(len(waits) > 0, strings.Join(waits, ", ")), ms(v.WorstCaseRetryMS))
}

// backoffText renders the strategy; the kinds are the `backoff` values of
// the `validate --json` contract.
func backoffText(rc *validate.ResolvedRetry) string {
	switch rc.Backoff {
	case "linear":
		return fmt.Sprintf("linear +%s", ms(rc.IncrementMS))
	case "exponential":
		return fmt.Sprintf("exponential ×%g", rc.Base)
	case "custom":
		ds := make([]string, len(rc.DelaysMS))
		for i, d := range rc.DelaysMS {
			ds[i] = ms(d)
		}
		return fmt.Sprintf("custom [%s] then max_delay", strings.Join(ds, ", "))
	}
	return rc.Backoff
}

func matchersText(list []validate.RetryOnMatcher) string {
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

func ms(v int64) string { return (time.Duration(v) * time.Millisecond).String() }

func orNone(ok bool, s string) string {
	if ok {
		return s
	}
	return "none"
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// shellQuote renders argv as a shell would need it typed: plain words as
// they are, anything else in single quotes.
func shellQuote(argv []string) string {
	out := make([]string, len(argv))
	for i, a := range argv {
		if a != "" && strings.Trim(a, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_=.,/:@+%") == "" {
			out[i] = a
			continue
		}
		out[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(out, " ")
}
