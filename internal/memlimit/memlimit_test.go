package memlimit

import (
	"math"
	"runtime/debug"
	"strings"
	"testing"
)

// Bound sets a soft limit near the live heap while the job runs and puts
// the previous one back when it ends; from BigJob items it says so.
func TestBoundSetsALimitAndRestoresThePrevious(t *testing.T) {
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	before := debug.SetMemoryLimit(-1)
	var said []string
	stop := Bound(BigJob, func(f string, a ...any) { said = append(said, f) })
	// The first limit is set by Bound's goroutine after a collection; stop
	// waits for it.
	stop()
	if got := debug.SetMemoryLimit(-1); got != before {
		t.Fatalf("limit after stop = %d, want the previous %d", got, before)
	}
	if len(said) != 1 || !strings.Contains(said[0], "soft memory limit") {
		t.Fatalf("logf heard %q, want the limit set", said)
	}
}

func TestBoundFollowsTheLiveHeapWhileRunning(t *testing.T) {
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	before := debug.SetMemoryLimit(-1)
	stop := Bound(10, func(string, ...any) { t.Error("a small job's limit is not announced") })
	defer stop()
	for range 1000 {
		if l := debug.SetMemoryLimit(-1); l != before && l != math.MaxInt64 {
			if l < int64(16<<20) || l > int64(liveHeap()*5/4+16<<20)+1<<20 {
				t.Fatalf("limit %d MiB, live heap %d MiB: want 1.25 × live + 16 MiB", l>>20, liveHeap()>>20)
			}
			return
		}
		debug.FreeOSMemory() // a collection, and time for Bound's goroutine
	}
	t.Fatal("Bound set no limit")
}

// With GOGC or GOMEMLIMIT set the user decides: neither changes anything.
func TestUserSettingsWin(t *testing.T) {
	t.Setenv("GOMEMLIMIT", "1GiB")
	before := debug.SetMemoryLimit(-1)
	prevGC := debug.SetGCPercent(-1)
	debug.SetGCPercent(prevGC)
	stop := Bound(BigJob, func(string, ...any) { t.Error("logf called with GOMEMLIMIT set") })
	restore := TightLoad()
	if got := debug.SetGCPercent(-1); got != prevGC {
		debug.SetGCPercent(got)
		t.Errorf("GC percent %d under TightLoad with GOMEMLIMIT set, want %d", got, prevGC)
	} else {
		debug.SetGCPercent(got)
	}
	restore()
	stop()
	if got := debug.SetMemoryLimit(-1); got != before {
		t.Errorf("limit = %d, want unchanged %d", got, before)
	}
}

func TestTightLoadLowersTheTargetUntilRestored(t *testing.T) {
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	prev := debug.SetGCPercent(100)
	defer debug.SetGCPercent(prev)
	restore := TightLoad()
	if got := debug.SetGCPercent(-1); got != loadGCPercent {
		t.Fatalf("GC percent while loading = %d, want %d", got, loadGCPercent)
	} else {
		debug.SetGCPercent(got)
	}
	restore()
	if got := debug.SetGCPercent(100); got != 100 {
		t.Fatalf("GC percent after restore = %d, want 100", got)
	}
}
