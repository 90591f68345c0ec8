// Package memlimit keeps a job's process near its live memory: the Go
// runtime's collector target while a job's items load (TightLoad), and a
// soft memory limit that follows the live heap while the job runs (Bound).
// Both step aside when the user set GOGC or GOMEMLIMIT.
package memlimit

import (
	"context"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// BigJob is the item count from which Bound keeps a fixed limit with more
// slack and says what it set.
const BigJob = 100_000

// loadGCPercent is the collector's target while a job's items load
// (TightLoad).
const loadGCPercent = 25

// TightLoad keeps the heap near its live size while a job's items load:
// decoding them makes about as much garbage as they keep, and with Go's
// default target (100) the heap's high-water mark reached about twice the
// items before Bound set the job's limit — a million-item job peaked
// at 650 MB while loading, against 535 MB running. Unless GOGC or
// GOMEMLIMIT is set it lowers the target to loadGCPercent; the returned
// function restores it.
func TightLoad() func() {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		return func() {}
	}
	prev := debug.SetGCPercent(loadGCPercent)
	return func() { debug.SetGCPercent(prev) }
}

// boundEvery is how often Bound follows the live heap.
const boundEvery = 2 * time.Second

// Bound keeps the job's process near its live memory. A job's live
// heap is small and grows slowly (the checkpoint's items, go-git's object
// cache, bounded at 4 MiB), but each item allocates megabytes that die at
// once (trees decoded for a merge, index reads), and with Go's default GC
// target alone the heap's high-water mark, and so the peak RSS, rose with
// the job's length (47 MiB after 1,000 items, 127 MiB after 10,000); for a
// job of a million items, whose items stay in memory, it would reach about
// twice their size between collections. Unless GOGC or GOMEMLIMIT is set,
// it keeps a soft memory limit of 1.25 times the live heap plus 16 MiB
// (64 MiB from BigJob items: the result such a job ends with needs about
// half the items' size again): set after a collection when the job starts,
// then, below BigJob items, moved every boundEvery to follow the live
// heap the runtime measured at its last collection, so a heap that grows
// with the job never makes the collector run without pause (a limit fixed
// at the start doubled the CLI's CPU per item at 10,000 items).
//
// items is the number of the job's items it holds in memory (0 when
// they are read from its checkpoint as needed); logf hears the limit set when the job has
// BigJob items or more. The returned function stops it and restores the
// previous limit (call it when the job ends).
func Bound(items int, logf func(format string, args ...any)) func() {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		return func() {}
	}
	prev := debug.SetMemoryLimit(-1)
	slack := uint64(16 << 20)
	if items >= BigJob {
		slack = 64 << 20
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.GC()
		live := liveHeap()
		debug.SetMemoryLimit(int64(live*5/4 + slack))
		if items >= BigJob {
			logf("map: %d item(s) in memory: heap %d MiB, soft memory limit %d MiB", items, live>>20, (live*5/4+slack)>>20)
			// Its items are most of its heap and were all loaded: the
			// limit stays (bench/scale's 1M job is measured with it).
			<-ctx.Done()
			return
		}
		// A real ticker, not the job's clock: this tunes the runtime
		// and must not spin under a test's clock that never waits.
		t := time.NewTicker(boundEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				debug.SetMemoryLimit(int64(liveHeap()*5/4 + slack))
			}
		}
	}()
	return func() {
		stop()
		<-done
		debug.SetMemoryLimit(prev)
	}
}

// liveHeap is the heap the runtime found live at its last collection
// (runtime/metrics has it since Go 1.21, below the module's floor).
func liveHeap() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}
