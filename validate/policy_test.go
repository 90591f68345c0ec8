package validate_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/prodigy-action/prodigy-action/config"
	"github.com/prodigy-action/prodigy-action/validate"
)

func TestRetryPolicyNil(t *testing.T) {
	t.Parallel()
	p, err := validate.RetryPolicy(nil)
	if err != nil || p.Attempts != 1 || len(p.Schedule()) != 0 {
		t.Fatalf("RetryPolicy(nil) = %+v, %v; want one attempt", p, err)
	}
}

func TestRetryPolicySchedules(t *testing.T) {
	t.Parallel()
	sec := time.Second
	cfg := func(change func(*config.RetryConfig)) *config.RetryConfig {
		c := validate.DefaultRetryConfig()
		change(&c)
		return &c
	}
	tests := []struct {
		name string
		cfg  *config.RetryConfig
		want []time.Duration
	}{
		{"defaults", cfg(func(*config.RetryConfig) {}), []time.Duration{sec, 2 * sec}},
		{"fixed", cfg(func(c *config.RetryConfig) {
			c.Attempts, c.Backoff, c.InitialDelay = 4, config.BackoffConfig{Kind: "fixed"}, 2*sec
		}), []time.Duration{2 * sec, 2 * sec, 2 * sec}},
		{"linear", cfg(func(c *config.RetryConfig) {
			c.Attempts, c.Backoff = 4, config.BackoffConfig{Kind: "linear", Increment: 2 * sec}
		}), []time.Duration{sec, 3 * sec, 5 * sec}},
		{"exponential base 3 capped", cfg(func(c *config.RetryConfig) {
			c.Attempts, c.Backoff, c.MaxDelay = 5, config.BackoffConfig{Kind: "exponential", Base: 3}, 10*sec
		}), []time.Duration{sec, 3 * sec, 9 * sec, 10 * sec}},
		{"fibonacci", cfg(func(c *config.RetryConfig) {
			c.Attempts, c.Backoff = 7, config.BackoffConfig{Kind: "fibonacci"}
		}), []time.Duration{sec, sec, 2 * sec, 3 * sec, 5 * sec, 8 * sec}},
		{"custom falls back to max_delay", cfg(func(c *config.RetryConfig) {
			c.Attempts, c.MaxDelay = 4, 7*sec
			c.Backoff = config.BackoffConfig{Kind: "custom", Delays: []time.Duration{500 * time.Millisecond}}
		}), []time.Duration{500 * time.Millisecond, 7 * sec, 7 * sec}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, err := validate.RetryPolicy(tt.cfg)
			if err != nil {
				t.Fatal(err)
			}
			if got := p.Schedule(); !slices.Equal(got, tt.want) {
				t.Errorf("Schedule() = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestRetryPolicyCopiesSettings(t *testing.T) {
	t.Parallel()
	c := validate.DefaultRetryConfig()
	c.Jitter, c.JitterFactor, c.RetryBudget = true, 0.5, time.Minute
	c.RetryOn = []config.MatcherConfig{{Kind: "network"}, {Kind: "pattern", Pattern: `flaky \d+`}}
	p, err := validate.RetryPolicy(&c)
	if err != nil {
		t.Fatal(err)
	}
	if !p.Jitter || p.JitterFactor != 0.5 || p.Budget != time.Minute || p.MaxDelay != 30*time.Second || p.Attempts != 3 {
		t.Errorf("policy = %+v", p)
	}
	if len(p.RetryOn) != 2 || !p.RetryOn[1].Matches(errors.New("flaky 12")) || p.RetryOn[1].Matches(errors.New("flaky")) {
		t.Errorf("matchers = %+v", p.RetryOn)
	}
}

func TestRetryPolicyRejectsBadConfigs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		change func(*config.RetryConfig)
	}{
		{"zero attempts", func(c *config.RetryConfig) { c.Attempts = 0 }},
		{"zero max delay", func(c *config.RetryConfig) { c.MaxDelay = 0 }},
		{"negative initial", func(c *config.RetryConfig) { c.InitialDelay = -time.Second }},
		{"jitter factor", func(c *config.RetryConfig) { c.JitterFactor = 1.5 }},
		{"unknown kind", func(c *config.RetryConfig) { c.Backoff.Kind = "quadratic" }},
		{"base below one", func(c *config.RetryConfig) { c.Backoff.Base = 0.5 }},
		{"negative custom delay", func(c *config.RetryConfig) {
			c.Backoff = config.BackoffConfig{Kind: "custom", Delays: []time.Duration{-1}}
		}},
		{"bad pattern", func(c *config.RetryConfig) { c.RetryOn = []config.MatcherConfig{{Kind: "pattern", Pattern: "("}} }},
		{"unknown matcher", func(c *config.RetryConfig) { c.RetryOn = []config.MatcherConfig{{Kind: "cosmic"}} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := validate.DefaultRetryConfig()
			tt.change(&c)
			if _, err := validate.RetryPolicy(&c); err == nil {
				t.Fatal("want an error")
			}
		})
	}
}

func TestDefaultRetryConfigIsSeedDefaults(t *testing.T) {
	t.Parallel()
	c := validate.DefaultRetryConfig()
	if c.Attempts != 3 || c.InitialDelay != time.Second || c.MaxDelay != 30*time.Second || c.Jitter ||
		c.JitterFactor != 0.3 || c.Backoff.Kind != "exponential" || c.Backoff.Base != 2 {
		t.Errorf("DefaultRetryConfig() = %+v", c)
	}
}
