package retry_test

import (
	"math"
	"testing"
	"time"

	"github.com/prodigy-action/prodigy-action/retry"
)

const s = time.Second

// TestSeedBehavior reproduces every "Behavior" line of the seed
// backoff-strategies.md through Policy.Wait (cap included, no jitter).
func TestSeedBehavior(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		policy retry.Policy
		want   []time.Duration // wait before retry 1, 2, …
	}{
		{"fixed 2s", retry.Policy{Backoff: retry.Fixed(2 * s), MaxDelay: 30 * s},
			[]time.Duration{2 * s, 2 * s, 2 * s}},
		{"fixed explicit delay 5s", retry.Policy{Backoff: retry.Fixed(5 * s), MaxDelay: 30 * s},
			[]time.Duration{5 * s, 5 * s, 5 * s}},
		{"linear 1s+2s", retry.Policy{Backoff: retry.Linear(s, 2*s), MaxDelay: 30 * s},
			[]time.Duration{1 * s, 3 * s, 5 * s}},
		{"exponential base 2", retry.Policy{Backoff: retry.Exponential(s, 2), MaxDelay: 100 * s},
			[]time.Duration{1 * s, 2 * s, 4 * s, 8 * s, 16 * s}},
		{"exponential capped at max_delay", retry.Policy{Backoff: retry.Exponential(s, 2), MaxDelay: 10 * s},
			[]time.Duration{1 * s, 2 * s, 4 * s, 8 * s, 10 * s, 10 * s}},
		{"exponential default cap 30s", retry.Policy{Backoff: retry.Exponential(s, 2), MaxDelay: 30 * s},
			[]time.Duration{1 * s, 2 * s, 4 * s, 8 * s, 16 * s, 30 * s, 30 * s}},
		{"exponential base 3", retry.Policy{Backoff: retry.Exponential(s, 3), MaxDelay: 100 * s},
			[]time.Duration{1 * s, 3 * s, 9 * s, 27 * s, 81 * s}},
		{"fibonacci 1s", retry.Policy{Backoff: retry.Fibonacci(s), MaxDelay: 30 * s},
			[]time.Duration{1 * s, 1 * s, 2 * s, 3 * s, 5 * s, 8 * s}},
		{"fibonacci capped", retry.Policy{Backoff: retry.Fibonacci(10 * s), MaxDelay: 30 * s},
			[]time.Duration{10 * s, 10 * s, 20 * s, 30 * s, 30 * s}},
		{"custom list then max_delay fallback", retry.Policy{
			Backoff:  retry.Custom([]time.Duration{500 * time.Millisecond, s, 2 * s, 5 * s, 10 * s}, 30*s),
			MaxDelay: 30 * s,
		}, []time.Duration{500 * time.Millisecond, s, 2 * s, 5 * s, 10 * s, 30 * s, 30 * s}},
		{"custom empty list uses max_delay", retry.Policy{Backoff: retry.Custom(nil, 30*s), MaxDelay: 30 * s},
			[]time.Duration{30 * s, 30 * s, 30 * s}},
		{"custom entry above max_delay is capped", retry.Policy{
			Backoff: retry.Custom([]time.Duration{time.Minute}, 30*s), MaxDelay: 30 * s,
		}, []time.Duration{30 * s, 30 * s}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			for i, want := range tt.want {
				if got := tt.policy.Wait(i+1, 0.5); got != want {
					t.Errorf("retry %d: got %v, want %v", i+1, got, want)
				}
			}
		})
	}
}

func TestBackoffEdges(t *testing.T) {
	t.Parallel()
	huge := time.Duration(math.MaxInt64)
	tests := []struct {
		name string
		b    retry.Backoff
		k    int
		want time.Duration
	}{
		{"k below 1 is retry 1 (linear)", retry.Linear(s, 2*s), 0, s},
		{"k below 1 is retry 1 (custom)", retry.Custom([]time.Duration{7 * s}, s), -3, 7 * s},
		{"fibonacci large k saturates", retry.Fibonacci(s), 500, huge},
		{"fibonacci fib(92) fits", retry.Fibonacci(1), 92, 7540113804746346429},
		{"exponential large k saturates", retry.Exponential(s, 2), 10000, huge},
		{"linear large k saturates", retry.Linear(s, time.Hour), math.MaxInt, huge},
		{"exponential bad base treated as 2", retry.Exponential(s, math.NaN()), 3, 4 * s},
		{"exponential base 1 is constant", retry.Exponential(s, 1), 9, s},
		{"negative fixed is zero", retry.Fixed(-s), 1, 0},
		{"negative custom entry is zero", retry.Custom([]time.Duration{-s}, s), 1, 0},
		{"zero initial stays zero", retry.Fibonacci(0), 40, 0},
		{"zero initial exponential huge k", retry.Exponential(0, 2), 5000, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := tt.b.Delay(tt.k); got != tt.want {
				t.Errorf("Delay(%d) = %v, want %v", tt.k, got, tt.want)
			}
		})
	}
}

func TestCustomCopiesDelays(t *testing.T) {
	t.Parallel()
	delays := []time.Duration{s}
	b := retry.Custom(delays, 0)
	delays[0] = time.Hour
	if got := b.Delay(1); got != s {
		t.Fatalf("Delay(1) = %v after caller mutated its slice, want 1s", got)
	}
}
