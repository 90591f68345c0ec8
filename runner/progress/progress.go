// Package progress is a job's progress line: done, failed and running
// items, elapsed time and an ETA, redrawn live on a terminal and printed
// as a line every interval otherwise (CI logs). It shares the job's log
// lock, so a progress line and a log line never interleave.
package progress

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
)

// Line prints done/failed/running/ETA to stderr: a live line on a
// terminal, periodic lines otherwise (CI logs). Safe for concurrent use.
type Line struct {
	logMu    *sync.Mutex // the job's: one log line at a time, this one included
	w        io.Writer
	tty      bool
	interval time.Duration
	now      func() time.Time

	mu                           sync.Mutex
	total, done, failed, running int
	began                        time.Time
	live                         bool // a live line is on screen
	stopCh                       chan struct{}
	stopOnce                     sync.Once
}

// New returns a progress line printed to w every interval (10 s when 0;
// every second on a terminal), holding logMu (which every other log line
// of the job holds) while it writes; now is the clock of its elapsed time
// and ETA.
func New(logMu *sync.Mutex, w io.Writer, interval time.Duration, now func() time.Time) *Line {
	if interval <= 0 {
		interval = 10 * time.Second
	}
	p := &Line{logMu: logMu, w: w, interval: interval, now: now}
	if isTerminal(w) {
		p.tty = true
		p.interval = time.Second
	}
	return p
}

// isTerminal reports whether w is, or wraps (an Unwrap() io.Writer method,
// as the CLI's redacting stderr has), a character device: a terminal gets
// the live, redrawn line.
func isTerminal(w io.Writer) bool {
	for range 8 { // wrappers of wrappers, bounded
		switch v := w.(type) {
		case *os.File:
			st, err := v.Stat()
			return err == nil && st.Mode()&os.ModeCharDevice != 0
		case interface{ Unwrap() io.Writer }:
			w = v.Unwrap()
		default:
			return false
		}
	}
	return false
}

// Start launches the ticker; Stop ends it and clears a live line.
func (p *Line) Start() {
	p.stopCh = make(chan struct{})
	go func() {
		t := time.NewTicker(p.interval)
		defer t.Stop()
		for {
			select {
			case <-p.stopCh:
				return
			case <-t.C:
				p.tick()
			}
		}
	}()
}

func (p *Line) Stop() {
	if p.stopCh == nil {
		return
	}
	p.stopOnce.Do(func() { close(p.stopCh) })
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.live {
		fmt.Fprint(p.w, "\r\033[K")
		p.live = false
	}
}

// Begin starts counting a phase of total items.
func (p *Line) Begin(total int) {
	p.mu.Lock()
	p.total, p.done, p.failed, p.running = total, 0, 0, 0
	p.began = p.now()
	p.mu.Unlock()
}

// Started: an item started; Interrupted: a started one stopped unfinished.
func (p *Line) Started() { p.mu.Lock(); p.running++; p.mu.Unlock() }

func (p *Line) Interrupted() { p.mu.Lock(); p.running--; p.mu.Unlock() }

// Finished: a started item ended, failed or not.
func (p *Line) Finished(failed bool) {
	p.mu.Lock()
	p.running--
	p.done++
	if failed {
		p.failed++
	}
	p.mu.Unlock()
}

func (p *Line) tick() {
	p.logMu.Lock()
	defer p.logMu.Unlock()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.total == 0 {
		return
	}
	line := p.lineLocked()
	if p.tty {
		fmt.Fprintf(p.w, "\r\033[K%s", line)
		p.live = true
		return
	}
	fmt.Fprintln(p.w, line)
}

// ClearLine and Redraw bracket a log line on a terminal; callers hold the
// log lock.
func (p *Line) ClearLine() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.live {
		fmt.Fprint(p.w, "\r\033[K")
		p.live = false
	}
}

func (p *Line) Redraw() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tty && p.total > 0 && p.stopCh != nil {
		select {
		case <-p.stopCh:
			return
		default:
		}
		fmt.Fprintf(p.w, "\r\033[K%s", p.lineLocked())
		p.live = true
	}
}

func (p *Line) lineLocked() string {
	elapsed := p.now().Sub(p.began)
	eta := "?"
	if p.done > 0 && p.done < p.total {
		left := time.Duration(float64(elapsed) / float64(p.done) * float64(p.total-p.done))
		eta = left.Round(time.Second).String()
	} else if p.done >= p.total {
		eta = "0s"
	}
	pct := 100 * p.done / max(p.total, 1)
	bar := strings.Repeat("#", pct/5) + strings.Repeat(".", 20-pct/5)
	return fmt.Sprintf("[%s] %d/%d done (%d failed), %d running, elapsed %s, ETA %s",
		bar, p.done, p.total, p.failed, p.running, elapsed.Round(time.Second), eta)
}
