package retry

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

// ErrBudgetExhausted is wrapped by the error Do returns when the next wait
// would take the total backoff sleep past Policy.Budget.
var ErrBudgetExhausted = errors.New("retry budget exhausted")

// Attempt reports one failed execution to Options.OnAttempt.
type Attempt struct {
	// Number is the 1-based execution number that failed.
	Number int
	// Err is the error that execution returned.
	Err error
	// Delay is the wait before the next execution (0 when Final).
	Delay time.Duration
	// Final is true when no retry follows (success is never reported).
	Final bool
}

// Options holds Do's side effects; the zero value is valid.
type Options struct {
	// Clock sleeps between attempts; nil means SystemClock.
	Clock Clock
	// Rand returns uniform values in [0, 1) for jitter; nil means
	// math/rand/v2.Float64. It is called once per retry, only with Jitter.
	Rand func() float64
	// OnAttempt, when set, is called once per failed execution, before
	// sleeping, from the goroutine that called Do.
	OnAttempt func(Attempt)
}

// permanentError marks an error as not retryable.
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// Permanent marks err as not retryable: Do returns it at once (unwrapped).
// errors.Is and errors.As see through the mark. Permanent(nil) is nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err: err}
}

// IsPermanent reports whether err's chain holds a Permanent mark.
func IsPermanent(err error) bool {
	var pe *permanentError
	return errors.As(err, &pe)
}

// unmark removes a top-level Permanent mark so callers get their own error.
func unmark(err error) error {
	if pe, ok := err.(*permanentError); ok {
		return pe.err
	}
	return err
}

// Do runs fn (attempt = 1, 2, …) until it returns nil, and otherwise until:
//
//   - fn's error is not retryable (marked Permanent, or matched by no
//     RetryOn entry): Do returns that error (without the Permanent mark);
//   - the last of p.Attempts executions failed: Do returns its error as is;
//   - the next wait would take the total sleep past p.Budget: Do returns an
//     error wrapping ErrBudgetExhausted and the last error;
//   - ctx is cancelled, during a sleep or before an attempt: Do returns an
//     error wrapping ctx.Err() and the last error (if any).
//
// OnAttempt sees every failed execution before Do sleeps or returns;
// Attempt.Final is true exactly when no retry follows. The wait before
// retry k is p.Wait(k, o.Rand()).
func Do(ctx context.Context, p Policy, o Options, fn func(ctx context.Context, attempt int) error) error {
	clock, rnd := o.Clock, o.Rand
	if clock == nil {
		clock = SystemClock
	}
	if rnd == nil {
		rnd = rand.Float64
	}
	report := func(a Attempt) {
		if o.OnAttempt != nil {
			o.OnAttempt(a)
		}
	}
	var slept time.Duration
	var last error
	for n := 1; ; n++ {
		if err := ctx.Err(); err != nil {
			return cancelled(err, n, last)
		}
		err := fn(ctx, n)
		if err == nil {
			return nil
		}
		last = err
		if !p.retryable(err) || n >= p.attempts() {
			report(Attempt{Number: n, Err: err, Final: true})
			return unmark(err)
		}
		u := 0.0
		if p.Jitter {
			u = rnd()
		}
		wait := p.Wait(n, u)
		if p.Budget > 0 && addSat(slept, wait) > p.Budget {
			report(Attempt{Number: n, Err: err, Final: true})
			return fmt.Errorf("%w: %s budget, %s already slept, next wait %s (after attempt %d): %w",
				ErrBudgetExhausted, p.Budget, slept, wait, n, unmark(err))
		}
		report(Attempt{Number: n, Err: err, Delay: wait})
		if serr := clock.Sleep(ctx, wait); serr != nil {
			return cancelled(serr, n+1, last)
		}
		slept = addSat(slept, wait)
	}
}

// cancelled builds Do's error for a context cancelled before attempt next.
func cancelled(ctxErr error, next int, last error) error {
	if last == nil {
		return fmt.Errorf("retry cancelled before attempt %d: %w", next, ctxErr)
	}
	return fmt.Errorf("retry cancelled before attempt %d: %w; last error: %w", next, ctxErr, unmark(last))
}
