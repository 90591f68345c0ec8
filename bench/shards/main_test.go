package main

import "testing"

// TestGatherPhases reads the two phase lines gather logs, among others.
func TestGatherPhases(t *testing.T) {
	log := "gather: job bench\n" +
		"shard outputs fetched and verified in 812ms (2 at a time)\n" +
		"merged shard 3 (200 item(s))\n" +
		"50 shard(s) merged and imported in plan order in 1.172s\n"
	fetch, merge := gatherPhases(log)
	if fetch != 0.812 || merge != 1.172 {
		t.Errorf("phases = %v, %v; want 0.812, 1.172", fetch, merge)
	}
	if f, m := gatherPhases("nothing\n"); f != 0 || m != 0 {
		t.Errorf("phases of a log without them = %v, %v", f, m)
	}
}
