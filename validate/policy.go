package validate

import (
	"fmt"
	"regexp"

	"github.com/prodigy-action/prodigy-action/config"
	"github.com/prodigy-action/prodigy-action/retry"
)

// Retry config sources (ResolvedRetry.Source).
const (
	// RetrySourceWorkflow: the workflow gives a retry config.
	RetrySourceWorkflow = "workflow"
	// RetrySourceDefault: `on_item_failure: retry` without a retry config
	// uses config.DefaultRetryConfig.
	RetrySourceDefault = "default"
)

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

// DefaultRetryConfig returns the seed's retry defaults (3 attempts,
// exponential base 2, initial_delay 1s, max_delay 30s, jitter off with
// factor 0.3, every error retried, no budget): the config used for
// `on_item_failure: retry` when the workflow gives none.
func DefaultRetryConfig() config.RetryConfig { return config.DefaultRetryConfig() }

// RetryPolicy converts a parsed retry config into a retry.Policy. A nil
// config means "no retry": Policy{Attempts: 1}. Configs from config.Parse
// are already valid; a hand-built config with an unknown backoff kind, a
// bad matcher, attempts < 1, a non-positive max_delay, negative delays or
// a jitter factor outside [0, 1] is an error.
func RetryPolicy(c *config.RetryConfig) (retry.Policy, error) {
	if c == nil {
		return retry.Policy{Attempts: 1}, nil
	}
	if err := checkRetryConfig(c); err != nil {
		return retry.Policy{}, err
	}
	b, err := retryBackoff(c)
	if err != nil {
		return retry.Policy{}, err
	}
	matchers, err := retryMatchers(c.RetryOn)
	if err != nil {
		return retry.Policy{}, err
	}
	return retry.Policy{
		Attempts:     c.Attempts,
		Backoff:      b,
		MaxDelay:     c.MaxDelay,
		Jitter:       c.Jitter,
		JitterFactor: c.JitterFactor,
		RetryOn:      matchers,
		Budget:       c.RetryBudget,
	}, nil
}

func checkRetryConfig(c *config.RetryConfig) error {
	switch {
	case c.Attempts < 1:
		return fmt.Errorf("retry config: attempts must be at least 1, got %d", c.Attempts)
	case c.MaxDelay <= 0:
		return fmt.Errorf("retry config: max_delay must be positive, got %s", c.MaxDelay)
	case c.InitialDelay < 0 || c.Backoff.Increment < 0 || c.RetryBudget < 0:
		return fmt.Errorf("retry config: delays must not be negative")
	case c.JitterFactor < 0 || c.JitterFactor > 1:
		return fmt.Errorf("retry config: jitter_factor must be between 0 and 1, got %v", c.JitterFactor)
	}
	return nil
}

// retryBackoff builds the strategy of c (the formulas of DESIGN.md "Attempts
// and backoff"); custom falls back to max_delay past its list.
func retryBackoff(c *config.RetryConfig) (retry.Backoff, error) {
	switch c.Backoff.Kind {
	case config.BackoffFixed:
		return retry.Fixed(c.InitialDelay), nil
	case config.BackoffLinear:
		return retry.Linear(c.InitialDelay, c.Backoff.Increment), nil
	case config.BackoffExponential, "":
		base := c.Backoff.Base
		if base == 0 {
			base = config.DefaultBase
		}
		if base < 1 {
			return nil, fmt.Errorf("retry config: exponential base must be at least 1, got %v", base)
		}
		return retry.Exponential(c.InitialDelay, base), nil
	case config.BackoffFibonacci:
		return retry.Fibonacci(c.InitialDelay), nil
	case config.BackoffCustom:
		for _, d := range c.Backoff.Delays {
			if d < 0 {
				return nil, fmt.Errorf("retry config: custom delay %s is negative", d)
			}
		}
		return retry.Custom(c.Backoff.Delays, c.MaxDelay), nil
	}
	return nil, fmt.Errorf("retry config: unknown backoff kind %q", c.Backoff.Kind)
}

func retryMatchers(ms []config.MatcherConfig) ([]retry.Matcher, error) {
	out := make([]retry.Matcher, 0, len(ms))
	for _, m := range ms {
		switch m.Kind {
		case retry.MatchNetwork, retry.MatchTimeout, retry.MatchServerError, retry.MatchRateLimit:
			out = append(out, retry.Matcher{Kind: m.Kind})
		case retry.MatchPattern:
			re, err := regexp.Compile(m.Pattern)
			if err != nil {
				return nil, fmt.Errorf("retry config: retry_on pattern %q: %w", m.Pattern, err)
			}
			out = append(out, retry.Matcher{Kind: m.Kind, Pattern: re})
		default:
			return nil, fmt.Errorf("retry config: unknown retry_on matcher %q", m.Kind)
		}
	}
	return out, nil
}
