package retry

import (
	"context"
	"time"
)

// Clock is the time source of Do. Implementations must be safe for
// concurrent use.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// Sleep waits for d (returning at once when d <= 0) and returns nil, or
	// returns ctx.Err() as soon as ctx is cancelled.
	Sleep(ctx context.Context, d time.Duration) error
}

// SystemClock is the real clock: time.Now and a timer.
var SystemClock Clock = systemClock{}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

func (systemClock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
