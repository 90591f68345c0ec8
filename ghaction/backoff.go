package ghaction

import (
	"context"
	"errors"
	"io"
	"math"
	"net"
	"net/http"
	"time"

	"github.com/prodigy-action/prodigy-action/retry"
)

// Sleeper waits for d or until ctx is done, returning ctx's error in the
// latter case. Tests inject one that records durations and returns at once.
type Sleeper func(ctx context.Context, d time.Duration) error

// SleepContext is the production Sleeper.
func SleepContext(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C:
		return nil
	}
}

// RetryPolicy says how often and how long to retry transient HTTP failures
// (429, 500, 502, 503, 504 and transport errors). It mirrors the toolkit's
// artifact client: 5 attempts, 3 s base, ×1.5 per retry.
type RetryPolicy struct {
	// Attempts is the total number of tries including the first; < 1 means 5.
	Attempts int
	// Base is the wait before the first retry; 0 means 3s.
	Base time.Duration
	// Multiplier grows the wait per retry; < 1 means 1.5.
	Multiplier float64
	// Sleep waits between attempts; nil means SleepContext.
	Sleep Sleeper
}

func (p RetryPolicy) withDefaults() RetryPolicy {
	if p.Attempts < 1 {
		p.Attempts = 5
	}
	if p.Base <= 0 {
		p.Base = 3 * time.Second
	}
	if p.Multiplier < 1 {
		p.Multiplier = 1.5
	}
	if p.Sleep == nil {
		p.Sleep = SleepContext
	}
	return p
}

// retryable marks an error as transient for do.
type retryable struct{ err error }

func (r retryable) Error() string { return r.err.Error() }
func (r retryable) Unwrap() error { return r.err }

// retryableStatus reports whether an HTTP status is worth retrying.
func retryableStatus(code int) bool {
	switch code {
	case http.StatusTooManyRequests, http.StatusInternalServerError, http.StatusBadGateway,
		http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// isTransportError reports whether err is a network-level failure (not a
// cancelled context) that a retry may fix.
func isTransportError(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var ne net.Error
	var oe *net.OpError
	return errors.As(err, &ne) || errors.As(err, &oe) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

// do runs fn until it succeeds, returns a non-retryable error, or the
// attempts are used up: the project's one retry loop (retry.Do), with
// fn's errors marked retryable{} retried and every other error returned at
// once. The last error is returned unwrapped from the marker; a context
// cancelled while waiting returns an error wrapping both.
func (p RetryPolicy) do(ctx context.Context, fn func() error) error {
	p = p.withDefaults()
	policy := retry.Policy{Attempts: p.Attempts, Backoff: retry.Exponential(p.Base, p.Multiplier), MaxDelay: math.MaxInt64}
	return retry.Do(ctx, policy, retry.Options{Clock: sleeperClock(p.Sleep)}, func(context.Context, int) error {
		err := fn()
		var r retryable
		if err == nil {
			return nil
		}
		if !errors.As(err, &r) {
			return retry.Permanent(err)
		}
		return r.err
	})
}

// sleeperClock adapts a Sleeper to retry.Clock.
type sleeperClock Sleeper

func (s sleeperClock) Now() time.Time { return time.Now() }

func (s sleeperClock) Sleep(ctx context.Context, d time.Duration) error { return s(ctx, d) }
