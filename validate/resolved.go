package validate

import "github.com/prodigy-action/prodigy-action/config"

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

// resolvedRetry is rc as validate reports it.
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
