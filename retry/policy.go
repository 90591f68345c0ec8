package retry

import (
	"math"
	"time"
)

// Policy describes how an operation is retried. The zero value runs the
// operation once. A Policy is a value: copying it is cheap and it holds no
// per-run state, so one Policy may serve many concurrent Do calls.
type Policy struct {
	// Attempts is the total number of executions including the first;
	// values below 1 are treated as 1.
	Attempts int
	// Backoff computes the base wait before each retry; nil waits 0.
	Backoff Backoff
	// MaxDelay caps every wait (before and after jitter); 0 or less means
	// no cap.
	MaxDelay time.Duration
	// Jitter enables the ±JitterFactor random spread of each wait.
	Jitter bool
	// JitterFactor is the relative spread of jitter, clamped to [0, 1].
	JitterFactor float64
	// RetryOn lists the errors worth retrying; empty means every error is
	// retryable (except those marked Permanent).
	RetryOn []Matcher
	// Budget is the total backoff sleep allowed over one Do call; 0 means
	// unlimited. Time spent in the operation itself does not count.
	Budget time.Duration
}

// attempts returns the effective number of executions (at least 1).
func (p Policy) attempts() int {
	if p.Attempts < 1 {
		return 1
	}
	return p.Attempts
}

// capped returns the un-jittered wait before retry k: Backoff.Delay(k)
// limited to MaxDelay.
func (p Policy) capped(k int) time.Duration {
	var d time.Duration
	if p.Backoff != nil {
		d = nonNegative(p.Backoff.Delay(atLeastOne(k)))
	}
	return p.clamp(d)
}

// clamp limits d to [0, MaxDelay] (or [0, ∞) without a cap).
func (p Policy) clamp(d time.Duration) time.Duration {
	if d < 0 {
		return 0
	}
	if p.MaxDelay > 0 && d > p.MaxDelay {
		return p.MaxDelay
	}
	return d
}

// factor returns JitterFactor clamped to [0, 1] (NaN counts as 0).
func (p Policy) factor() float64 {
	f := p.JitterFactor
	switch {
	case !(f > 0):
		return 0
	case f > 1:
		return 1
	}
	return f
}

// Wait returns the wait before retry k (k >= 1; smaller k is treated as 1):
// the backoff delay capped at MaxDelay, then, when Jitter is set, moved by
// d·JitterFactor·(2u−1) — uniform over [d−d·f, d+d·f] for u uniform in
// [0, 1) — and finally clamped to [0, MaxDelay]. u outside [0, 1) is
// clamped into it. Without jitter u is ignored. The result never exceeds
// MaxDelay when MaxDelay > 0.
func (p Policy) Wait(k int, u float64) time.Duration {
	d := p.capped(k)
	if !p.Jitter {
		return d
	}
	f := p.factor()
	if f == 0 || d == 0 {
		return d
	}
	switch {
	case !(u >= 0): // also NaN
		u = 0
	case u >= 1:
		u = math.Nextafter(1, 0)
	}
	j := float64(d) + float64(d)*f*(2*u-1)
	return p.clamp(fromFloat(j))
}

// Schedule returns the un-jittered waits before retry 1 … Attempts−1 (an
// empty, non-nil slice when the policy never retries).
func (p Policy) Schedule() []time.Duration {
	n := p.attempts() - 1
	out := make([]time.Duration, 0, n)
	for k := 1; k <= n; k++ {
		out = append(out, p.capped(k))
	}
	return out
}

// WorstCase returns the longest total backoff one Do call can sleep: the
// sum over the schedule of each wait raised by jitter's upper bound
// (d·(1+JitterFactor) when Jitter is set), each still capped at MaxDelay,
// and limited by Budget when one is set. The sum saturates instead of
// overflowing.
func (p Policy) WorstCase() time.Duration {
	var total time.Duration
	f := 0.0
	if p.Jitter {
		f = p.factor()
	}
	for _, d := range p.Schedule() {
		total = addSat(total, p.clamp(fromFloat(float64(d)*(1+f))))
	}
	if p.Budget > 0 && total > p.Budget {
		return p.Budget
	}
	return total
}
