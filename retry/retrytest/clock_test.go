package retrytest_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/prodigy-action/prodigy-action/retry/retrytest"
)

func TestFakeClock(t *testing.T) {
	t.Parallel()
	start := time.Date(2025, 5, 1, 0, 0, 0, 0, time.UTC)
	c := retrytest.NewFakeClock(start)
	ctx := context.Background()
	for _, d := range []time.Duration{time.Second, 0, 2 * time.Second} {
		if err := c.Sleep(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	c.Advance(time.Minute)
	if got, want := c.Now(), start.Add(time.Minute+3*time.Second); !got.Equal(want) {
		t.Errorf("Now() = %v, want %v", got, want)
	}
	if got := c.Sleeps(); !slices.Equal(got, []time.Duration{time.Second, 0, 2 * time.Second}) {
		t.Errorf("Sleeps() = %v", got)
	}
	if got := c.Slept(); got != 3*time.Second {
		t.Errorf("Slept() = %v, want 3s", got)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := c.Sleep(cctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Errorf("Sleep on cancelled ctx = %v", err)
	}
	if len(c.Sleeps()) != 3 {
		t.Error("a cancelled Sleep must not be recorded")
	}
}
