package retry_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"testing"
	"time"

	"github.com/prodigy-action/prodigy-action/retry"
	"github.com/prodigy-action/prodigy-action/retry/retrytest"
)

var epoch = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

// failing returns an operation that fails the first n calls with errs[i]
// (the last entry repeats) and records the attempt numbers it saw.
func failing(n int, seen *[]int, errs ...error) func(context.Context, int) error {
	calls := 0
	return func(_ context.Context, attempt int) error {
		*seen = append(*seen, attempt)
		calls++
		if calls > n {
			return nil
		}
		return errs[min(calls-1, len(errs)-1)]
	}
}

func TestDo(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	tests := []struct {
		name      string
		policy    retry.Policy
		failures  int
		errs      []error
		wantErr   error  // checked with errors.Is
		wantText  string // exact error text, when set
		wantCalls []int
		wantSleep []time.Duration
		wantFinal []bool // Final flag of each OnAttempt call
	}{
		{
			name:      "succeeds first time",
			policy:    retry.Policy{Attempts: 3, Backoff: retry.Fixed(s)},
			failures:  0,
			errs:      []error{boom},
			wantCalls: []int{1},
			wantSleep: nil,
			wantFinal: nil,
		},
		{
			name:      "retries then succeeds",
			policy:    retry.Policy{Attempts: 3, Backoff: retry.Exponential(s, 2), MaxDelay: 30 * s},
			failures:  2,
			errs:      []error{boom},
			wantCalls: []int{1, 2, 3},
			wantSleep: []time.Duration{s, 2 * s},
			wantFinal: []bool{false, false},
		},
		{
			name:      "exhausts attempts and returns the last error",
			policy:    retry.Policy{Attempts: 3, Backoff: retry.Fibonacci(s), MaxDelay: 30 * s},
			failures:  9,
			errs:      []error{errors.New("first"), boom},
			wantErr:   boom,
			wantCalls: []int{1, 2, 3},
			wantSleep: []time.Duration{s, s},
			wantFinal: []bool{false, false, true},
		},
		{
			name:      "zero attempts runs once",
			policy:    retry.Policy{Backoff: retry.Fixed(s)},
			failures:  9,
			errs:      []error{boom},
			wantErr:   boom,
			wantCalls: []int{1},
			wantFinal: []bool{true},
		},
		{
			name:      "permanent error stops at once",
			policy:    retry.Policy{Attempts: 5, Backoff: retry.Fixed(s)},
			failures:  9,
			errs:      []error{retry.Permanent(io.ErrUnexpectedEOF)},
			wantErr:   io.ErrUnexpectedEOF,
			wantCalls: []int{1},
			wantFinal: []bool{true},
		},
		{
			name: "retry_on skips unmatched errors",
			policy: retry.Policy{Attempts: 5, Backoff: retry.Fixed(s),
				RetryOn: []retry.Matcher{{Kind: retry.MatchNetwork}}},
			failures:  9,
			errs:      []error{errors.New("connection refused"), errors.New("syntax error")},
			wantText:  "syntax error",
			wantCalls: []int{1, 2},
			wantSleep: []time.Duration{s},
			wantFinal: []bool{false, true},
		},
		{
			name:      "budget stops before the sleep that would exceed it",
			policy:    retry.Policy{Attempts: 10, Backoff: retry.Linear(s, s), MaxDelay: 30 * s, Budget: 4 * s},
			failures:  9,
			errs:      []error{boom},
			wantErr:   retry.ErrBudgetExhausted,
			wantCalls: []int{1, 2, 3},
			wantSleep: []time.Duration{s, 2 * s}, // next wait 3s would reach 6s > 4s
			wantFinal: []bool{false, false, true},
		},
		{
			name:      "budget exactly reached is allowed",
			policy:    retry.Policy{Attempts: 3, Backoff: retry.Fixed(2 * s), MaxDelay: 30 * s, Budget: 4 * s},
			failures:  2,
			errs:      []error{boom},
			wantCalls: []int{1, 2, 3},
			wantSleep: []time.Duration{2 * s, 2 * s},
			wantFinal: []bool{false, false},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			clock := retrytest.NewFakeClock(epoch)
			var calls []int
			var finals []bool
			var reported []retry.Attempt
			err := retry.Do(context.Background(), tt.policy, retry.Options{
				Clock: clock,
				OnAttempt: func(a retry.Attempt) {
					finals = append(finals, a.Final)
					reported = append(reported, a)
				},
			}, failing(tt.failures, &calls, tt.errs...))
			switch {
			case tt.wantText != "":
				if err == nil || err.Error() != tt.wantText {
					t.Fatalf("err = %v, want %q returned as is", err, tt.wantText)
				}
			case tt.wantErr == nil:
				if err != nil {
					t.Fatalf("err = %v, want nil", err)
				}
			case !errors.Is(err, tt.wantErr):
				t.Fatalf("err = %v, want errors.Is %v", err, tt.wantErr)
			}
			if !slices.Equal(calls, tt.wantCalls) {
				t.Errorf("attempts = %v, want %v", calls, tt.wantCalls)
			}
			if got := clock.Sleeps(); !slices.Equal(got, tt.wantSleep) {
				t.Errorf("sleeps = %v, want %v", got, tt.wantSleep)
			}
			if !slices.Equal(finals, tt.wantFinal) {
				t.Errorf("OnAttempt finals = %v, want %v", finals, tt.wantFinal)
			}
			for i, a := range reported {
				if a.Number != i+1 {
					t.Errorf("report %d has Number %d", i, a.Number)
				}
				if a.Final && a.Delay != 0 {
					t.Errorf("final report %d has Delay %v, want 0", i, a.Delay)
				}
				if !a.Final && a.Delay != clock.Sleeps()[i] {
					t.Errorf("report %d Delay %v, but slept %v", i, a.Delay, clock.Sleeps()[i])
				}
			}
		})
	}
}

func TestDoBudgetErrorKeepsLastError(t *testing.T) {
	t.Parallel()
	last := errors.New("exit status 101")
	p := retry.Policy{Attempts: 5, Backoff: retry.Fixed(10 * s), MaxDelay: 30 * s, Budget: 5 * s}
	err := retry.Do(context.Background(), p, retry.Options{Clock: retrytest.NewFakeClock(epoch)},
		func(context.Context, int) error { return last })
	if !errors.Is(err, retry.ErrBudgetExhausted) || !errors.Is(err, last) {
		t.Fatalf("err = %v, want both ErrBudgetExhausted and the last error", err)
	}
}

func TestDoCancelledDuringSleep(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	last := errors.New("flaky")
	clock := retrytest.NewFakeClock(epoch)
	calls := 0
	err := retry.Do(ctx, retry.Policy{Attempts: 5, Backoff: retry.Fixed(s)}, retry.Options{
		Clock:     clock,
		OnAttempt: func(retry.Attempt) { cancel() }, // cancelled just before the sleep
	}, func(context.Context, int) error { calls++; return last })
	if !errors.Is(err, context.Canceled) || !errors.Is(err, last) {
		t.Fatalf("err = %v, want context.Canceled and the last error", err)
	}
	if calls != 1 {
		t.Errorf("calls = %d, want 1", calls)
	}
}

func TestDoCancelledBeforeStart(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	calls := 0
	err := retry.Do(ctx, retry.Policy{Attempts: 3}, retry.Options{Clock: retrytest.NewFakeClock(epoch)},
		func(context.Context, int) error { calls++; return nil })
	if !errors.Is(err, context.Canceled) || calls != 0 {
		t.Fatalf("err = %v, calls = %d; want context.Canceled and no call", err, calls)
	}
}

func TestDoSystemClockSleepsZeroDelaysWithoutBlocking(t *testing.T) {
	t.Parallel()
	// Nil Clock means SystemClock; zero waits must not block.
	n := 0
	err := retry.Do(context.Background(), retry.Policy{Attempts: 3, Backoff: retry.Fixed(0)}, retry.Options{},
		func(context.Context, int) error {
			n++
			if n < 3 {
				return fmt.Errorf("try %d", n)
			}
			return nil
		})
	if err != nil || n != 3 {
		t.Fatalf("err = %v, n = %d; want success on the third call", err, n)
	}
}

func TestSystemClockSleepCancelled(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := retry.SystemClock.Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("Sleep on a cancelled context = %v, want context.Canceled", err)
	}
}

func TestDoJitterUsesRand(t *testing.T) {
	t.Parallel()
	clock := retrytest.NewFakeClock(epoch)
	draws := []float64{0, 0.5, 0.999999}
	i := 0
	p := retry.Policy{Attempts: 4, Backoff: retry.Fixed(10 * s), MaxDelay: 30 * s, Jitter: true, JitterFactor: 0.5}
	_ = retry.Do(context.Background(), p, retry.Options{
		Clock: clock,
		Rand:  func() float64 { u := draws[i]; i++; return u },
	}, func(context.Context, int) error { return errors.New("x") })
	got := clock.Sleeps()
	if len(got) != 3 || got[0] != 5*s || got[1] != 10*s || got[2] < 14*s || got[2] >= 15*s {
		t.Fatalf("sleeps = %v, want [5s 10s ~15s)", got)
	}
	if clock.Now().Sub(epoch) != clock.Slept() {
		t.Errorf("fake time advanced %v, slept %v", clock.Now().Sub(epoch), clock.Slept())
	}
}

func TestPermanent(t *testing.T) {
	t.Parallel()
	if retry.Permanent(nil) != nil {
		t.Fatal("Permanent(nil) must be nil")
	}
	err := fmt.Errorf("wrapped: %w", retry.Permanent(io.EOF))
	if !errors.Is(err, io.EOF) || !retry.IsPermanent(err) {
		t.Fatalf("errors.Is/IsPermanent must see through the mark: %v", err)
	}
	if retry.IsPermanent(io.EOF) {
		t.Fatal("plain error reported as permanent")
	}
}
