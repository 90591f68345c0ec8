package main

import (
	"os"
	"testing"
	"time"
)

// TestWindowStatsSplitsRunnerAndTreeCPU: the window's CPU per item is the
// runner's own ticks, and the tree's adds the children it reaped, both
// between the 10 % and 90 % samples.
func TestWindowStatsSplitsRunnerAndTreeCPU(t *testing.T) {
	at := time.Unix(0, 0)
	var samples []sample
	for i := 0; i <= 10; i++ {
		samples = append(samples, sample{at: at.Add(time.Duration(i) * time.Second), cpuTicks: int64(i * 10), childTicks: int64(i * 30), finished: i * 100})
	}
	var r Run
	windowStats(&r, samples, 1000)
	if r.WindowItems != 800 || r.WindowS != 8 {
		t.Fatalf("window %d items in %.1f s, want 800 in 8", r.WindowItems, r.WindowS)
	}
	// 80 runner ticks (0.8 s) and 240 child ticks over 800 items.
	if r.CPUMSPerItem != 1 || r.TreeCPUMSPerItem != 4 {
		t.Errorf("runner %.3f, tree %.3f ms/item, want 1 and 4", r.CPUMSPerItem, r.TreeCPUMSPerItem)
	}
}

// TestCommitRatiosAreToTheThousandItemRun: every other run is divided by
// the N=1,000 runs' mean; without one there are none.
func TestCommitRatiosAreToTheThousandItemRun(t *testing.T) {
	runs := []Run{
		{N: 1000, CPUMSPerItem: 10, TreeCPUMSPerItem: 30, MergeMSPerItem: 8, PeakRSSMiB: 40},
		{N: 10000, CPUMSPerItem: 11, TreeCPUMSPerItem: 33, MergeMSPerItem: 8.8, PeakRSSMiB: 60},
	}
	got := commitRatios(runs)
	if len(got) != 1 || got[0].N != 10000 {
		t.Fatalf("ratios %+v", got)
	}
	near := func(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }
	if c := got[0]; !near(c.RunnerCPU, 1.1) || !near(c.TreeCPU, 1.1) || !near(c.Merge, 1.1) || !near(c.PeakRSS, 1.5) {
		t.Errorf("ratios %+v, want 1.1, 1.1, 1.1, 1.5", c)
	}
	// Two N=1,000 runs (first and last) count by their mean.
	twice := append(runs, Run{N: 1000, CPUMSPerItem: 12, TreeCPUMSPerItem: 36, MergeMSPerItem: 12, PeakRSSMiB: 40})
	if got := commitRatios(twice); len(got) != 1 || !near(got[0].RunnerCPU, 1) || !near(got[0].Merge, 0.88) {
		t.Errorf("ratios to two N=1,000 runs %+v, want runner 1.0 and merge 0.88", got)
	}
	if commitRatios(runs[1:]) != nil {
		t.Error("ratios without an N=1,000 run")
	}
}

// TestCPUTicksReadsSelfAndChildren: this process's /proc/self/stat gives
// non-negative ticks for both.
func TestCPUTicksReadsSelfAndChildren(t *testing.T) {
	self, children := cpuTicks(os.Getpid())
	if self < 0 || children < 0 {
		t.Fatalf("cpuTicks = %d, %d", self, children)
	}
	if s, c := cpuTicks(-1); s != -1 || c != -1 {
		t.Errorf("a missing process gave %d, %d", s, c)
	}
}
