package retry_test

import (
	"math"
	"testing"
	"time"

	"github.com/prodigy-action/prodigy-action/retry"
)

// FuzzWaitCapped proves the cap: for every strategy, every retry number,
// every jitter factor and every random draw, 0 <= Wait <= MaxDelay.
// The seed corpus runs under plain `go test`.
func FuzzWaitCapped(f *testing.F) {
	f.Add(uint8(0), int64(time.Second), int64(2*time.Second), 2.0, int64(30*time.Second), 1, true, 0.3, 0.999)
	f.Add(uint8(1), int64(time.Second), int64(2*time.Second), 2.0, int64(30*time.Second), 50, true, 1.0, 0.99999)
	f.Add(uint8(2), int64(time.Second), int64(0), 2.0, int64(30*time.Second), 1000, true, 0.5, 0.75)
	f.Add(uint8(2), int64(math.MaxInt64), int64(0), 1e300, int64(1), math.MaxInt, true, 1.0, 0.5)
	f.Add(uint8(3), int64(time.Second), int64(0), 0.0, int64(30*time.Second), 93, false, 0.0, 0.0)
	f.Add(uint8(4), int64(500*time.Millisecond), int64(time.Hour), 0.0, int64(time.Minute), 7, true, 0.3, 0.9)
	f.Add(uint8(2), int64(-5), int64(-5), -3.0, int64(10), -7, true, -2.0, -1.0)
	f.Add(uint8(1), int64(math.MaxInt64/2), int64(math.MaxInt64/2), 2.0, int64(math.MaxInt64), 3, true, 1.0, 0.9999999)
	f.Fuzz(func(t *testing.T, kind uint8, initial, inc int64, base float64, maxDelay int64, k int, jitter bool, factor, u float64) {
		if maxDelay <= 0 {
			maxDelay = 1 + (maxDelay & math.MaxInt32) // a cap is always set here
		}
		var b retry.Backoff
		switch kind % 5 {
		case 0:
			b = retry.Fixed(time.Duration(initial))
		case 1:
			b = retry.Linear(time.Duration(initial), time.Duration(inc))
		case 2:
			b = retry.Exponential(time.Duration(initial), base)
		case 3:
			b = retry.Fibonacci(time.Duration(initial))
		default:
			b = retry.Custom([]time.Duration{time.Duration(initial), time.Duration(inc)}, time.Duration(maxDelay))
		}
		p := retry.Policy{Backoff: b, MaxDelay: time.Duration(maxDelay), Jitter: jitter, JitterFactor: factor}
		got := p.Wait(k, u)
		if got < 0 || got > p.MaxDelay {
			t.Fatalf("Wait(%d, %v) = %v outside [0, %v] (kind %d, initial %d, inc %d, base %v, factor %v)",
				k, u, got, p.MaxDelay, kind%5, initial, inc, base, factor)
		}
		if raw := b.Delay(k); raw < 0 {
			t.Fatalf("Delay(%d) = %v is negative", k, raw)
		}
	})
}
