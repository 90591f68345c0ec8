package retry_test

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/prodigy-action/prodigy-action/retry"
)

func TestWaitJitter(t *testing.T) {
	t.Parallel()
	p := retry.Policy{Backoff: retry.Fixed(10 * s), MaxDelay: 100 * s, Jitter: true, JitterFactor: 0.3}
	tests := []struct {
		name string
		u    float64
		want time.Duration
	}{
		{"u=0 is the lower bound d-d*f", 0, 7 * s},
		{"u=0.5 is the base", 0.5, 10 * s},
		{"u=0.75 is halfway up", 0.75, 11500 * time.Millisecond},
		{"u below 0 is clamped", -4, 7 * s},
		{"NaN u is clamped to 0", math.NaN(), 7 * s},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := p.Wait(1, tt.u); got != tt.want {
				t.Errorf("Wait(1, %v) = %v, want %v", tt.u, got, tt.want)
			}
		})
	}
	t.Run("u at or above 1 reaches at most the upper bound", func(t *testing.T) {
		t.Parallel()
		for _, u := range []float64{0.9999999, 1, 7} {
			if got := p.Wait(1, u); got > 13*s || got < 12999*time.Millisecond {
				t.Errorf("Wait(1, %v) = %v, want within (12.999s, 13s]", u, got)
			}
		}
	})
}

func TestWaitJitterRespectsCap(t *testing.T) {
	t.Parallel()
	// The base delay equals the cap: jitter may lower it but never raise it.
	p := retry.Policy{Backoff: retry.Exponential(s, 2), MaxDelay: 30 * s, Jitter: true, JitterFactor: 1}
	if got := p.Wait(10, 0.999); got != 30*s {
		t.Errorf("Wait(10, 0.999) = %v, want the 30s cap", got)
	}
	if got := p.Wait(10, 0); got != 0 {
		t.Errorf("Wait(10, 0) with factor 1 = %v, want 0", got)
	}
}

func TestWaitIgnoresUWithoutJitter(t *testing.T) {
	t.Parallel()
	p := retry.Policy{Backoff: retry.Fixed(s), JitterFactor: 0.9}
	for _, u := range []float64{0, 0.3, 0.99} {
		if got := p.Wait(1, u); got != s {
			t.Errorf("Wait(1, %v) = %v, want 1s (jitter off)", u, got)
		}
	}
}

func TestWaitNoCapAndNilBackoff(t *testing.T) {
	t.Parallel()
	if got := (retry.Policy{Backoff: retry.Fixed(time.Hour)}).Wait(1, 0); got != time.Hour {
		t.Errorf("MaxDelay 0 must mean no cap, got %v", got)
	}
	if got := (retry.Policy{MaxDelay: s}).Wait(3, 0); got != 0 {
		t.Errorf("nil Backoff must wait 0, got %v", got)
	}
}

func TestScheduleAndWorstCase(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		p         retry.Policy
		schedule  []time.Duration
		worstCase time.Duration
	}{
		{"zero policy never retries", retry.Policy{}, []time.Duration{}, 0},
		{"one attempt never retries", retry.Policy{Attempts: 1, Backoff: retry.Fixed(s)}, []time.Duration{}, 0},
		{"fixed 3 attempts", retry.Policy{Attempts: 3, Backoff: retry.Fixed(2 * s), MaxDelay: 30 * s},
			[]time.Duration{2 * s, 2 * s}, 4 * s},
		{"exponential 6 attempts capped", retry.Policy{Attempts: 6, Backoff: retry.Exponential(s, 2), MaxDelay: 10 * s},
			[]time.Duration{s, 2 * s, 4 * s, 8 * s, 10 * s}, 25 * s},
		{"jitter upper bound still capped",
			retry.Policy{Attempts: 4, Backoff: retry.Fibonacci(10 * s), MaxDelay: 25 * s, Jitter: true, JitterFactor: 0.3},
			[]time.Duration{10 * s, 10 * s, 20 * s}, 13*s + 13*s + 25*s},
		{"budget bounds the worst case",
			retry.Policy{Attempts: 5, Backoff: retry.Fixed(10 * s), MaxDelay: 30 * s, Budget: 25 * s},
			[]time.Duration{10 * s, 10 * s, 10 * s, 10 * s}, 25 * s},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := tt.p.Schedule()
			if got == nil || !slices.Equal(got, tt.schedule) {
				t.Errorf("Schedule() = %v, want %v", got, tt.schedule)
			}
			if wc := tt.p.WorstCase(); wc != tt.worstCase {
				t.Errorf("WorstCase() = %v, want %v", wc, tt.worstCase)
			}
		})
	}
}
