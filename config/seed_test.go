package config_test

import (
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/prodigy-action/prodigy-action/config"
)

const (
	ms = time.Millisecond
	s  = time.Second
)

// retryDefaults returns the seed defaults with changes applied.
func retryDefaults(change func(*config.RetryConfig)) *config.RetryConfig {
	rc := config.DefaultRetryConfig()
	change(&rc)
	return &rc
}

// TestSeedSpellings parses every retry spelling of the seed
// backoff-strategies.md (config/testdata/seed-*.yml) into the same model.
func TestSeedSpellings(t *testing.T) {
	t.Parallel()
	tests := []struct {
		file string
		want *config.RetryConfig
	}{
		{"seed-fixed-simple.yml", retryDefaults(func(c *config.RetryConfig) {
			c.Backoff = config.BackoffConfig{Kind: "fixed"}
			c.InitialDelay = 2 * s
		})},
		{"seed-fixed-explicit.yml", retryDefaults(func(c *config.RetryConfig) {
			c.Backoff = config.BackoffConfig{Kind: "fixed"}
			c.InitialDelay = 5 * s
		})},
		{"seed-linear-v2.yml", retryDefaults(func(c *config.RetryConfig) {
			c.Attempts = 4
			c.Backoff = config.BackoffConfig{Kind: "linear", Increment: 2 * s}
		})},
		{"seed-linear-policy.yml", retryDefaults(func(c *config.RetryConfig) {
			c.Attempts = 4
			c.Backoff = config.BackoffConfig{Kind: "linear", Increment: 2 * s}
		})},
		{"seed-exponential-v2.yml", retryDefaults(func(c *config.RetryConfig) {
			c.Attempts = 6
			c.MaxDelay = 100 * s
		})},
		{"seed-exponential-policy.yml", retryDefaults(func(c *config.RetryConfig) {
			c.Attempts = 6
		})},
		{"seed-exponential-simple.yml", retryDefaults(func(c *config.RetryConfig) {
			c.Attempts = 6
			c.MaxDelay = 10 * s
		})},
		{"seed-exponential-capped.yml", retryDefaults(func(c *config.RetryConfig) {
			c.Attempts = 7
		})},
		{"seed-fibonacci-simple.yml", retryDefaults(func(c *config.RetryConfig) {
			c.Attempts = 7
			c.Backoff = config.BackoffConfig{Kind: "fibonacci"}
		})},
		{"seed-fibonacci-policy.yml", retryDefaults(func(c *config.RetryConfig) {
			c.Attempts = 7
			c.Backoff = config.BackoffConfig{Kind: "fibonacci"}
		})},
		{"seed-custom.yml", retryDefaults(func(c *config.RetryConfig) {
			c.Attempts = 8
			c.Backoff = config.BackoffConfig{Kind: "custom", Delays: []time.Duration{500 * ms, s, 2 * s, 5 * s, 10 * s}}
		})},
		{"seed-custom-empty.yml", retryDefaults(func(c *config.RetryConfig) {
			c.MaxDelay = 20 * s
			c.Backoff = config.BackoffConfig{Kind: "custom", Delays: []time.Duration{}}
		})},
		{"seed-retryconfig-fields.yml", retryDefaults(func(c *config.RetryConfig) {
			c.Jitter = true
		})},
		{"seed-mapreduce-example.yml", retryDefaults(func(c *config.RetryConfig) {
			c.Attempts = 5
			c.Backoff = config.BackoffConfig{Kind: "fibonacci"}
			c.Jitter = true
		})},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			t.Parallel()
			w, err := config.Load(filepath.Join("testdata", tt.file))
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if got := w.ErrorPolicy.Retry; !reflect.DeepEqual(got, tt.want) {
				t.Errorf("retry config\n got %+v\nwant %+v", got, tt.want)
			}
			if len(w.Warnings) != 0 {
				t.Errorf("unexpected warnings: %q", w.Warnings)
			}
		})
	}
}

// TestSpellingsAgree checks that the retry_v2 and error_policy spellings
// of one strategy give identical models.
func TestSpellingsAgree(t *testing.T) {
	t.Parallel()
	pairs := [][2]string{
		{"seed-linear-v2.yml", "seed-linear-policy.yml"},
		{"seed-fibonacci-simple.yml", "seed-fibonacci-policy.yml"},
	}
	for _, p := range pairs {
		a, errA := config.Load(filepath.Join("testdata", p[0]))
		b, errB := config.Load(filepath.Join("testdata", p[1]))
		if errA != nil || errB != nil {
			t.Fatalf("load: %v, %v", errA, errB)
		}
		if !reflect.DeepEqual(a.ErrorPolicy.Retry, b.ErrorPolicy.Retry) {
			t.Errorf("%s and %s differ: %+v vs %+v", p[0], p[1], a.ErrorPolicy.Retry, b.ErrorPolicy.Retry)
		}
	}
}
