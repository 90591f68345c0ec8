package runner

import (
	"context"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// bigJob is the item count from which a job says what heap bound it set.
const bigJob = 100_000

// loadGCPercent is the collector's target while a job's items load
// (tightLoad).
const loadGCPercent = 25

// tightLoad keeps the heap near its live size while a job's items load:
// decoding them makes about as much garbage as they keep, and with Go's
// default target (100) the heap's high-water mark reached about twice the
// items before boundHeap set the job's limit — a million-item job peaked
// at 650 MB while loading, against 535 MB running. Unless GOGC or
// GOMEMLIMIT is set it lowers the target to loadGCPercent; the returned
// function restores it.
func tightLoad() func() {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		return func() {}
	}
	prev := debug.SetGCPercent(loadGCPercent)
	return func() { debug.SetGCPercent(prev) }
}

// heapBoundEvery is how often boundHeap follows the live heap.
const heapBoundEvery = 2 * time.Second

// boundHeap keeps the job's process near its live memory. A job's live
// heap is small and grows slowly (the checkpoint's items, go-git's object
// cache, bounded at 4 MiB), but each item allocates megabytes that die at
// once (trees decoded for a merge, index reads), and with Go's default GC
// target alone the heap's high-water mark, and so the peak RSS, rose with
// the job's length (47 MiB after 1,000 items, 127 MiB after 10,000); for a
// job of a million items, whose items stay in memory, it would reach about
// twice their size between collections. Unless GOGC or GOMEMLIMIT is set,
// it keeps a soft memory limit of 1.25 times the live heap plus 16 MiB
// (64 MiB from bigJob items: the result such a job ends with needs about
// half the items' size again): set after a collection when the job starts,
// then, below bigJob items, moved every heapBoundEvery to follow the live
// heap the runtime measured at its last collection, so a heap that grows
// with the job never makes the collector run without pause (a limit fixed
// at the start doubled the CLI's CPU per item at 10,000 items). The
// returned function stops it and restores the previous limit (call it when
// the job ends).
func (j *job) boundHeap() func() {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		return func() {}
	}
	prev := debug.SetMemoryLimit(-1)
	slack := uint64(16 << 20)
	if j.total() >= bigJob {
		slack = 64 << 20
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.GC()
		live := liveHeap()
		debug.SetMemoryLimit(int64(live*5/4 + slack))
		if j.total() >= bigJob {
			j.logf("map: %d item(s) in memory: heap %d MiB, soft memory limit %d MiB", j.total(), live>>20, (live*5/4+slack)>>20)
			// Its items are most of its heap and were all loaded: the
			// limit stays (bench/scale's 1M job is measured with it).
			<-ctx.Done()
			return
		}
		// A real ticker, not the job's clock: this tunes the runtime
		// and must not spin under a test's clock that never waits.
		t := time.NewTicker(heapBoundEvery)
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
