package retry

import (
	"math"
	"time"
)

// maxDuration is the largest representable duration; every strategy
// saturates there instead of overflowing.
const maxDuration = time.Duration(math.MaxInt64)

// Backoff computes the un-capped base wait before retry k (k >= 1: the wait
// after the k-th failed execution). Values of k below 1 are treated as 1.
// Implementations are immutable and safe for concurrent use; results never
// overflow (they saturate at the largest time.Duration) and are never
// negative.
type Backoff interface {
	Delay(k int) time.Duration
}

// BackoffFunc adapts a function to the Backoff interface.
type BackoffFunc func(k int) time.Duration

// Delay calls f(k).
func (f BackoffFunc) Delay(k int) time.Duration { return f(k) }

var _ Backoff = BackoffFunc(nil)

// Fixed waits d before every retry.
func Fixed(d time.Duration) Backoff {
	d = nonNegative(d)
	return BackoffFunc(func(int) time.Duration { return d })
}

// Linear waits initial + inc·(k−1) before retry k: 1s, 3s, 5s for
// initial 1s and inc 2s.
func Linear(initial, inc time.Duration) Backoff {
	initial, inc = nonNegative(initial), nonNegative(inc)
	return BackoffFunc(func(k int) time.Duration {
		k = atLeastOne(k)
		return addSat(initial, mulSat(inc, int64(k-1)))
	})
}

// Exponential waits initial·base^(k−1) before retry k: 1s, 2s, 4s, 8s for
// initial 1s and base 2. A base that is not a positive finite number is
// treated as 2 (the seed's default).
func Exponential(initial time.Duration, base float64) Backoff {
	initial = nonNegative(initial)
	if !(base > 0) || math.IsInf(base, 0) {
		base = 2
	}
	return BackoffFunc(func(k int) time.Duration {
		if initial == 0 {
			return 0 // 0·Inf would be NaN for huge k
		}
		return fromFloat(float64(initial) * math.Pow(base, float64(atLeastOne(k)-1)))
	})
}

// Fibonacci waits initial·fib(k) before retry k, with fib(1) = fib(2) = 1:
// 1s, 1s, 2s, 3s, 5s, 8s for initial 1s. fib is computed iteratively and
// saturates, so large k neither recurses nor overflows.
func Fibonacci(initial time.Duration) Backoff {
	initial = nonNegative(initial)
	return BackoffFunc(func(k int) time.Duration {
		return mulSat(initial, fib(atLeastOne(k)))
	})
}

// Custom waits delays[k−1] before retry k, and fallback when k exceeds the
// list (an empty list waits fallback before every retry). The slice is
// copied.
func Custom(delays []time.Duration, fallback time.Duration) Backoff {
	ds := make([]time.Duration, len(delays))
	for i, d := range delays {
		ds[i] = nonNegative(d)
	}
	fallback = nonNegative(fallback)
	return BackoffFunc(func(k int) time.Duration {
		k = atLeastOne(k)
		if k <= len(ds) {
			return ds[k-1]
		}
		return fallback
	})
}

// fib returns the k-th Fibonacci number (fib(1) = fib(2) = 1), saturating at
// math.MaxInt64.
func fib(k int) int64 {
	a, b := int64(0), int64(1)
	for i := 1; i < k; i++ {
		if b > math.MaxInt64-a {
			return math.MaxInt64
		}
		a, b = b, a+b
	}
	return b
}

func atLeastOne(k int) int {
	if k < 1 {
		return 1
	}
	return k
}

func nonNegative(d time.Duration) time.Duration {
	if d < 0 {
		return 0
	}
	return d
}

// addSat adds two non-negative durations, saturating at maxDuration.
func addSat(a, b time.Duration) time.Duration {
	if a > maxDuration-b {
		return maxDuration
	}
	return a + b
}

// mulSat multiplies a non-negative duration by a non-negative factor,
// saturating at maxDuration.
func mulSat(d time.Duration, n int64) time.Duration {
	if d == 0 || n == 0 {
		return 0
	}
	if n > int64(maxDuration/d) {
		return maxDuration
	}
	return d * time.Duration(n)
}

// fromFloat converts nanoseconds held in a float64 to a duration, clamping
// to [0, maxDuration] (NaN becomes maxDuration: a broken computation must
// not turn into "retry immediately").
func fromFloat(ns float64) time.Duration {
	switch {
	case math.IsNaN(ns) || ns >= float64(math.MaxInt64):
		return maxDuration
	case ns <= 0:
		return 0
	}
	return time.Duration(ns)
}
