package runner_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prodigy-action/prodigy-action/runner"
)

// exactWorkflow: item n fails when n%failEvery == failEvery-1; an item with
// n%conflictEvery == 2 writes shared-<n%2>.txt (so items of different
// shards conflict), every other item its own file.
const exactWorkflow = `
name: exact
mode: mapreduce
map:
  input: items.json
  max_parallel: 2
  agent_template:
    - shell: |
        n=$PRODIGY_ITEM_INDEX
        if [ $(( n %% %[1]d )) = %[2]d ]; then echo "item $n failed" >&2; exit 3; fi
        f="f$n.txt"
        if [ $(( n %% %[3]d )) = 2 ]; then f="shared-$(( n %% 2 )).txt"; fi
        echo "$n" > "$f" && git add -A && git commit -qm "item $n"
error_policy:
  on_item_failure: dlq
  continue_on_failure: true
reduce:
  - shell: files=$(ls | tr "\n" " ") && echo "$files" > files.txt && git add -A && git commit -qm reduce
`

// exactScale is the size of the sharded-job tests: small by default;
// PRODIGY_SHARD_SCALE=ITEMSxSHARDS (e.g. 10000x50) runs them at scale.
func exactScale(t *testing.T) (items, shards, failEvery, conflictEvery int) {
	items, shards, failEvery, conflictEvery = 24, 4, 7, 5
	if s := os.Getenv("PRODIGY_SHARD_SCALE"); s != "" {
		a, b, ok := strings.Cut(s, "x")
		n, err1 := strconv.Atoi(a)
		k, err2 := strconv.Atoi(b)
		if !ok || err1 != nil || err2 != nil || n < 1 || k < 1 {
			t.Fatalf("PRODIGY_SHARD_SCALE=%q: want ITEMSxSHARDS", s)
		}
		items, shards, failEvery, conflictEvery = n, k, 13, 997
	}
	return
}

// runAllShards runs every shard of the plan in its own clone and returns
// the outputs in shard order.
func runAllShards(t *testing.T, r *testRepo, dir string, o runner.Options, n int) []string {
	t.Helper()
	outs := make([]string, n)
	for k := range n {
		c := r.clone(fmt.Sprintf("s%d", k))
		outs[k] = filepath.Join(t.TempDir(), "out")
		if _, err := runner.RunShard(context.Background(), runner.ShardOptions{Run: shardOpts(c, o), PlanDir: dir, Shard: k, OutDir: outs[k]}); err != nil {
			t.Fatalf("shard %d: %v", k, err)
		}
	}
	return outs
}

// gathered is what a gather produced: the results branch's tree, every
// item's outcome and the DLQ (id, error type, attempts, message).
type gathered struct{ tree, items, dlq string }

func gatheredOf(t *testing.T, g *testRepo, res *runner.Result) gathered {
	t.Helper()
	var items []string
	for _, it := range res.Items {
		items = append(items, fmt.Sprintf("%s:%s:%d:%s", it.ItemID, it.State, it.Attempts, it.ErrorType))
	}
	var recs []string
	for id, r := range g.dlqRecords("job-1") {
		var hist []string
		for _, f := range r.FailureHistory {
			hist = append(hist, fmt.Sprintf("%d/%s/%s", f.AttemptNumber, f.ErrorType, f.ErrorMessage))
		}
		recs = append(recs, id+"="+strings.Join(hist, ";"))
	}
	slices.Sort(recs)
	return gathered{tree: g.git("rev-parse", "prodigy/job-1^{tree}"), items: strings.Join(items, " "), dlq: strings.Join(recs, "\n")}
}

// gatherArrivals gathers in a fresh clone as the outputs arrive: batches
// lists the shards arriving before each gather (outputs already arrived
// are given again, in a shuffled order). Every gather but the last must
// fail with items pending.
func gatherArrivals(t *testing.T, r *testRepo, name, dir string, o runner.Options, outs []string, batches [][]int, rng *rand.Rand) gathered {
	t.Helper()
	g := r.clone(name)
	var have []string
	var res *runner.Result
	var err error
	for i, b := range batches {
		for _, k := range b {
			have = append(have, outs[k])
		}
		rng.Shuffle(len(have), func(a, b int) { have[a], have[b] = have[b], have[a] })
		res, err = runner.Gather(context.Background(), runner.GatherOptions{Run: shardOpts(g, o), PlanDir: dir, Outputs: slices.Clone(have)})
		if i < len(batches)-1 {
			if !errors.Is(err, runner.ErrJobFailed) || res == nil || res.Pending == 0 {
				t.Fatalf("%s: gather %d of %d: %v, pending %v", name, i+1, len(batches), err, res)
			}
			continue
		}
		if err != nil || res.Pending != 0 || res.Status != runner.StatusCompleted {
			t.Fatalf("%s: last gather: %+v, %v", name, res, err)
		}
	}
	return gatheredOf(t, g, res)
}

// TestGatherIsAFunctionOfTheOutputs: the same shard outputs, arriving in
// different orders and batches (each gather in its own clone and state),
// give the same results tree, item outcomes and DLQ — with items of
// different shards writing the same files (cross-shard conflicts) and
// failing items. PRODIGY_SHARD_SCALE=10000x50 runs it at scale.
func TestGatherIsAFunctionOfTheOutputs(t *testing.T) {
	items, shards, failEvery, conflictEvery := exactScale(t)
	list := make([]string, items)
	for i := range list {
		list[i] = strconv.Itoa(i)
	}
	r := newTestRepo(t, map[string]string{"items.json": "[" + strings.Join(list, ",") + "]"})
	start := time.Now()
	dir, o := shardFixture(t, r, fmt.Sprintf(exactWorkflow, failEvery, failEvery-1, conflictEvery), shards)
	t.Logf("plan: %d items in %d shards, %v", items, shards, time.Since(start))
	start = time.Now()
	outs := runAllShards(t, r, dir, o, shards)
	t.Logf("shards: %v", time.Since(start))
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b9))
	all := make([]int, shards)
	for k := range all {
		all[k] = k
	}
	reversed := slices.Clone(all)
	slices.Reverse(reversed)
	perm := rng.Perm(shards)
	oneByOne := make([][]int, shards)
	for i, k := range perm {
		oneByOne[i] = []int{k}
	}
	perm2 := rng.Perm(shards)
	cut := max(1, shards/2)
	if perm2[:cut][0] == 0 && shards > 1 {
		// Make sure the first batch misses shard 0 at least once: later
		// shards must wait for it.
		i := slices.Index(perm2, 0)
		perm2[0], perm2[i] = perm2[i], perm2[0]
		perm2 = append(perm2[1:], perm2[0])
	}
	cases := []struct {
		name    string
		batches [][]int
	}{
		{"all at once, reversed", [][]int{reversed}},
		{"one at a time, shuffled", oneByOne},
		{"two batches, shuffled", [][]int{perm2[:cut], perm2[cut:]}},
	}
	var want gathered
	for i, c := range cases {
		start = time.Now()
		got := gatherArrivals(t, r, fmt.Sprintf("g%d", i), dir, o, outs, c.batches, rng)
		t.Logf("%s: %d gather(s), %v", c.name, len(c.batches), time.Since(start))
		if i == 0 {
			want = got
			if !strings.Contains(got.items, "MergeConflict") || !strings.Contains(got.items, "CommandFailed") {
				t.Fatalf("the fixture made no cross-shard conflict or failure: %s", got.items)
			}
			continue
		}
		if got.tree != want.tree {
			t.Errorf("%s: results tree %s, want %s", c.name, got.tree, want.tree)
		}
		if got.items != want.items {
			t.Errorf("%s: item outcomes differ:\n%s\nwant\n%s", c.name, got.items, want.items)
		}
		if got.dlq != want.dlq {
			t.Errorf("%s: DLQ differs:\n%s\nwant\n%s", c.name, got.dlq, want.dlq)
		}
	}
}
