package progress

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestLineCountsAndEstimates: off a terminal each tick prints one line
// with what is done, failed and running, the elapsed time and the ETA, all
// from the clock it was given; nothing is printed before a phase begins.
func TestLineCountsAndEstimates(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var out bytes.Buffer
	var mu sync.Mutex
	p := New(&mu, &out, 0, func() time.Time { return now })
	if p.interval != 10*time.Second || p.tty {
		t.Fatalf("a buffer is no terminal: interval %s, tty %v", p.interval, p.tty)
	}
	p.tick()
	if out.Len() != 0 {
		t.Fatalf("printed before Begin: %q", out.String())
	}
	p.Begin(10)
	for range 4 {
		p.Started()
	}
	p.Finished(false)
	p.Finished(true)
	p.Interrupted()
	now = now.Add(20 * time.Second)
	p.tick()
	want := "[####................] 2/10 done (1 failed), 1 running, elapsed 20s, ETA 1m20s\n"
	if out.String() != want {
		t.Errorf("line %q, want %q", out.String(), want)
	}
	p.ClearLine() // nothing live off a terminal
	p.Redraw()
	if strings.Count(out.String(), "\n") != 1 || strings.Contains(out.String(), "\r") {
		t.Errorf("clear and redraw wrote off a terminal: %q", out.String())
	}
}
