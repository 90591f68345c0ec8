package spend

import (
	"context"
	"sync"
	"time"
)

// Clock is what a Cooldown waits with (retry.Clock's method set).
type Clock interface {
	Now() time.Time
	Sleep(ctx context.Context, d time.Duration) error
}

// NewCooldown returns a cool-down on clock that calls started when one
// begins (not when it is extended) and ended when it is over; both are
// called under the cool-down's lock, so they must not call back into it.
func NewCooldown(clock Clock, started func(until time.Time, reason string), ended func()) *Cooldown {
	return &Cooldown{clock: clock, started: started, ended: ended}
}

// Cooldown is a job's one fleet-wide rate-limit cool-down: while it is
// on, no agent (item or retry attempt) starts. A rate limit seen during a
// cool-down extends it instead of starting another. Safe for concurrent use.
type Cooldown struct {
	mu      sync.Mutex
	clock   Clock
	started func(until time.Time, reason string)
	ended   func()
	active  bool
	until   time.Time
	count   int
}

// Start begins (or extends) the cool-down for d.
func (c *Cooldown) Start(d time.Duration, reason string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	until := c.clock.Now().Add(d)
	if c.active {
		if until.After(c.until) {
			c.until = until
		}
		return
	}
	c.active, c.until = true, until
	c.count++
	c.started(until.UTC(), reason)
}

// Gate waits until no cool-down is on and then runs fn (may be nil) under
// the cool-down's lock, so nothing fn reports can fall inside a cool-down.
func (c *Cooldown) Gate(ctx context.Context, fn func()) error {
	for {
		c.mu.Lock()
		if c.active && !c.clock.Now().Before(c.until) {
			c.active = false
			c.ended()
		}
		if !c.active {
			if fn != nil {
				fn()
			}
			c.mu.Unlock()
			return nil
		}
		d := c.until.Sub(c.clock.Now())
		c.mu.Unlock()
		if err := c.clock.Sleep(ctx, d); err != nil {
			return err
		}
	}
}

// Finish ends a cool-down nobody waited out (the job is ending).
func (c *Cooldown) Finish() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.active {
		c.active = false
		c.ended()
	}
}

// Count is the number of cool-downs so far.
func (c *Cooldown) Count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.count
}
