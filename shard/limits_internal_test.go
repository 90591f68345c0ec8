package shard

import (
	"fmt"
	"testing"
)

// TestDivideLimitsNeverExceedsTheJob: the shards' max_failures parts add
// up to the job's, and the budget parts to at most what is left after
// planning. (PlanJob refuses more shards than max_failures:
// TestJobLimitsHoldAcrossShards.)
func TestDivideLimitsNeverExceedsTheJob(t *testing.T) {
	for _, tc := range []struct {
		shards, maxFailures int
		budget, spent       float64
		wantFailures        string
		wantCost            float64
	}{
		{2, 2, 1.00, 0, "[1 1]", 0.50},
		{3, 10, 1.00, 0.10, "[4 3 3]", 0.30},
		{1, 5, 2.00, 2.50, "[5]", 0.0001},
		{3, 0, 0.10, 0, "[0 0 0]", 0.03},
	} {
		p := &Plan{MaxFailures: tc.maxFailures, MaxCostUSD: tc.budget, Shards: make([]PlanShard, tc.shards)}
		divideLimits(p, tc.spent)
		var parts []int
		var cost float64
		for _, sh := range p.Shards {
			parts = append(parts, sh.MaxFailures)
			cost += sh.MaxCostUSD
			if sh.MaxCostUSD != tc.wantCost {
				t.Errorf("%+v: shard budget %v, want %v", tc, sh.MaxCostUSD, tc.wantCost)
			}
		}
		if got := fmt.Sprint(parts); got != tc.wantFailures {
			t.Errorf("%+v: max_failures parts %s, want %s", tc, got, tc.wantFailures)
		}
		if tc.budget > 0 && tc.spent < tc.budget && cost > tc.budget-tc.spent+1e-9 {
			t.Errorf("%+v: budget parts add up to %v, more than the %v left", tc, cost, tc.budget-tc.spent)
		}
	}
}
