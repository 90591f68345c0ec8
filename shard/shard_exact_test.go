package shard_test

import (
	"context"
	"encoding/json"
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

	"github.com/prodigy-action/prodigy-action/jobstore"
	"github.com/prodigy-action/prodigy-action/runner"
	"github.com/prodigy-action/prodigy-action/shard"
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
func runAllShards(t *testing.T, r *testRepo, dir string, o Options, n int) []string {
	t.Helper()
	return runShards(t, r, dir, o, n, false)
}

// runShards runs shards 0 to n-1 of the plan in dir, each in a clone of r
// of its own, and returns their output directories. A shard's error fails
// the test, but for runner.ErrJobFailed (a shard stopped by a policy)
// when stops is set.
func runShards(t *testing.T, r *testRepo, dir string, o Options, n int, stops bool) []string {
	t.Helper()
	outs := make([]string, n)
	for k := range n {
		c := r.clone(fmt.Sprintf("s%d", k))
		outs[k] = filepath.Join(t.TempDir(), "out")
		_, err := runShard(context.Background(), ShardOptions{Run: shardOpts(c, o), PlanDir: dir, Shard: k, OutDir: outs[k]})
		if err != nil && !(stops && errors.Is(err, runner.ErrJobFailed)) {
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
	for id, r := range g.DLQRecords("job-1") {
		var hist []string
		for _, f := range r.FailureHistory {
			hist = append(hist, fmt.Sprintf("%d/%s/%s", f.AttemptNumber, f.ErrorType, f.ErrorMessage))
		}
		recs = append(recs, id+"="+strings.Join(hist, ";"))
	}
	slices.Sort(recs)
	return gathered{tree: g.Git("rev-parse", "prodigy/job-1^{tree}"), items: strings.Join(items, " "), dlq: strings.Join(recs, "\n")}
}

// gatherArrivals gathers in a fresh clone as the outputs arrive: batches
// lists the shards arriving before each gather (outputs already arrived
// are given again, in a shuffled order). Every gather but the last must
// fail with items pending.
func gatherArrivals(t *testing.T, r *testRepo, name, dir string, o Options, outs []string, batches [][]int, rng *rand.Rand) gathered {
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
		res, err = gatherJob(context.Background(), GatherOptions{Run: shardOpts(g, o), PlanDir: dir, Outputs: slices.Clone(have)})
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

// copyOutput copies a shard output directory (to forge it).
func copyOutput(t *testing.T, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "forged")
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	return dst
}

func editResult(t *testing.T, dir string, edit func(*shard.Result)) {
	t.Helper()
	path := filepath.Join(dir, shard.ResultFile)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var sr shard.Result
	if err := json.Unmarshal(data, &sr); err != nil {
		t.Fatal(err)
	}
	edit(&sr)
	if data, err = json.Marshal(&sr); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestGatherRefusesForeignAndForgedOutputs: outputs of another plan of the
// same job id, of another job, and forged ones (items of another shard in
// result.json or dlq/, a merge pushed onto the shard branch, files past
// their size limit, sparse so the test stays cheap) are refused before
// anything is gathered: a usage error (exit 2) naming the output and
// why, no job state, the results branch untouched. A repository whose
// gather state is another plan's refuses this plan.
func TestGatherRefusesForeignAndForgedOutputs(t *testing.T) {
	r := newTestRepo(t, map[string]string{"items.json": `[1,2,3,4]`})
	dir, o := shardFixture(t, r, okWorkflow, 2)
	outs := runAllShards(t, r, dir, o, 2)
	ctx := context.Background()

	// Plan B: the same job id planned again (in another clone).
	rb := r.clone("planB")
	rb.Home = filepath.Join(t.TempDir(), "homeB")
	dirB, oB := shardFixture(t, rb, okWorkflow, 2)
	outsB := runAllShards(t, rb, dirB, oB, 2)
	// Another job.
	rc := r.clone("planC")
	wfC := rc.Workflow(okWorkflow)
	oC := rc.options(wfC)
	oC.JobID = "job-2"
	dirC := filepath.Join(t.TempDir(), "planC")
	if _, err := planJob(ctx, PlanOptions{Run: oC, Dir: dirC, Shards: 2}); err != nil {
		t.Fatal(err)
	}
	outsC := runAllShards(t, rc, dirC, oC, 2)

	wrongItem := copyOutput(t, outs[0])
	editResult(t, wrongItem, func(sr *shard.Result) { sr.Items[0].ItemID = "item_3" })
	foreignRecord := copyOutput(t, outs[0])
	rec := `{"item_id":"item_3","item_data":3,"first_attempt":"2026-01-01T00:00:00Z","last_attempt":"2026-01-01T00:00:00Z","failure_count":1,"failure_history":[{"attempt_number":1,"timestamp":"2026-01-01T00:00:00Z","error_type":"CommandFailed","error_message":"x"}],"error_signature":"x","reprocess_eligible":true,"manual_review_required":false}`
	if err := os.WriteFile(filepath.Join(foreignRecord, shard.DLQDir, "item_3.json"), []byte(rec), 0o644); err != nil {
		t.Fatal(err)
	}
	hugeResult := copyOutput(t, outs[0])
	if err := os.Truncate(filepath.Join(hugeResult, shard.ResultFile), 3<<30); err != nil {
		t.Fatal(err)
	}
	hugeBundle := copyOutput(t, outs[0])
	if err := os.Truncate(filepath.Join(hugeBundle, shard.BundleFile), shard.MaxBundleBytes+1); err != nil {
		t.Fatal(err)
	}
	hugeRecord := copyOutput(t, outs[0])
	recs, _ := filepath.Glob(filepath.Join(hugeRecord, shard.DLQDir, "*"))
	huge := filepath.Join(hugeRecord, shard.DLQDir, "item_0.json")
	if len(recs) > 0 {
		huge = recs[0]
	}
	if err := os.WriteFile(huge, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(huge, shard.MaxRecordBytes+1); err != nil {
		t.Fatal(err)
	}
	// A merge pushed onto shard 0's branch, claiming an item of shard 1.
	s0 := r.clone("forger")
	p, err := shard.LoadPlan(dir)
	if err != nil {
		t.Fatal(err)
	}
	s0.Git("fetch", "-q", filepath.Join(outs[0], shard.BundleFile), "prodigy/job-1/shard-0:refs/heads/forged")
	s0.Git("checkout", "-q", "forged")
	s0.Git("checkout", "-q", "-b", "side", p.BaseCommit)
	if err := os.WriteFile(filepath.Join(s0.Dir, "evil.txt"), []byte("evil"), 0o644); err != nil {
		t.Fatal(err)
	}
	s0.Git("add", "evil.txt")
	s0.Git("-c", "user.name=x", "-c", "user.email=x@x", "commit", "-qm", "evil")
	s0.Git("checkout", "-q", "forged")
	s0.Git("-c", "user.name=x", "-c", "user.email=x@x", "merge", "-q", "--no-ff", "side", "-m", "Merge item_2\n\nProdigy-Job: job-1\nProdigy-Item: \"item_2\"")
	forgedMerge := copyOutput(t, outs[0])
	s0.Git("branch", "-f", "prodigy/job-1/shard-0", "forged")
	s0.Git("bundle", "create", "-q", filepath.Join(forgedMerge, shard.BundleFile), "prodigy/job-1/shard-0", "^"+p.BaseCommit)
	head := s0.Git("rev-parse", "forged")
	editResult(t, forgedMerge, func(sr *shard.Result) { sr.Head = head })

	g := r.clone("g")
	for _, c := range []struct {
		name, out, want string
	}{
		{"another plan of the same job", outsB[1], "another plan of job job-1"},
		{"another job", outsC[0], "belongs to job job-2"},
		{"an item of another shard in result.json", wrongItem, `"item_3", which is not an item of shard 0`},
		{"a DLQ record of another shard's item", foreignRecord, `of item "item_3", not an item of shard 0`},
		{"result.json past its limit", hugeResult, "file too large"},
		{"shard.bundle past its limit", hugeBundle, "file too large"},
		{"a DLQ record past its limit", hugeRecord, "file too large"},
		{"a merge pushed onto the shard branch", forgedMerge, `brings item "item_2"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := gatherJob(ctx, GatherOptions{Run: shardOpts(g, o), PlanDir: dir, Outputs: []string{outs[1], c.out}})
			if runner.ExitCode(err) != 2 || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), c.out) || !strings.Contains(err.Error(), "refused") {
				t.Fatalf("gather = %v (exit %d), want a refusal naming %s and %q", err, runner.ExitCode(err), c.out, c.want)
			}
			if jobs, _ := jobstore.ListJobs(g.Home, ""); len(jobs) != 0 {
				t.Fatalf("a refused gather left state: %+v", jobs)
			}
		})
	}
	// The real outputs gather; plan B's are then refused by the state.
	if _, err := gatherJob(ctx, GatherOptions{Run: shardOpts(g, o), PlanDir: dir, Outputs: outs}); err != nil {
		t.Fatal(err)
	}
	_, err = gatherJob(ctx, GatherOptions{Run: shardOpts(g, oB), PlanDir: dirB, Outputs: outsB})
	pa, _ := shard.LoadPlan(dir)
	pb, _ := shard.LoadPlan(dirB)
	if runner.ExitCode(err) != 2 || !strings.Contains(err.Error(), pa.PlanID) || !strings.Contains(err.Error(), pb.PlanID) {
		t.Fatalf("gathering plan B over plan A's gather = %v, want a refusal naming both plans", err)
	}
}

const limitWorkflow = `
name: limits
mode: mapreduce
map:
  input: items.json
  max_parallel: 1
  agent_template:
    - shell: |
        if [ "${item.bad}" = yes ] && [ ! -e "$FIXED" ]; then echo bad >&2; exit 1; fi
        echo "$PRODIGY_ITEM_INDEX" > "f$PRODIGY_ITEM_INDEX.txt" && git add -A && git commit -qm "item $PRODIGY_ITEM_INDEX"
error_policy:
  on_item_failure: dlq
  continue_on_failure: true
  max_failures: 2
reduce:
  - shell: ls f*.txt | wc -l > count.txt && git add -A && git commit -qm reduce
`

// TestJobLimitsHoldAcrossShards: max_failures 2 over two shards is one
// failure per shard (4 bad items used to fail 4 times: 2 per shard); the
// job budget is divided the same way. The stopped shards are closed by
// the gather, which names the --from-pending plan; that plan continues exactly the pending items on
// the job's results, and its gather completes.
func TestJobLimitsHoldAcrossShards(t *testing.T) {
	fixed := filepath.Join(t.TempDir(), "fixed")
	t.Setenv("FIXED", fixed)
	r := newTestRepo(t, map[string]string{"items.json": `[{"bad":"yes"},{"bad":"yes"},{"bad":"no"},{"bad":"no"},{"bad":"yes"},{"bad":"yes"},{"bad":"no"},{"bad":"no"}]`})
	wf := r.Workflow(limitWorkflow)
	o := r.options(wf)
	o.MaxCostUSD = 1.01
	dir := filepath.Join(t.TempDir(), "plan")
	ctx := context.Background()
	// max_failures 2 cannot be divided among 3 shards: refused before setup.
	if _, err := planJob(ctx, PlanOptions{Run: o, Dir: dir, Shards: 3}); runner.ExitCode(err) != 2 || !strings.Contains(err.Error(), "--shards 2 or fewer") {
		t.Fatalf("3 shards for max_failures 2 = %v, want a usage error", err)
	}
	plan, err := planJob(ctx, PlanOptions{Run: o, Dir: dir, Shards: 2})
	if err != nil {
		t.Fatal(err)
	}
	var failures int
	var cost float64
	for _, sh := range plan.Shards {
		failures += sh.MaxFailures
		cost += sh.MaxCostUSD
	}
	if failures != 2 || cost > 1.01 || plan.Shards[0].MaxCostUSD != 0.50 {
		t.Fatalf("shard limits %+v: want max_failures parts adding up to 2 and budget parts of $0.50", plan.Shards)
	}
	var outs []string
	failed := 0
	for k := range 2 {
		c := r.clone(fmt.Sprintf("s%d", k))
		out := filepath.Join(t.TempDir(), "out")
		so := shardOpts(c, o)
		so.MaxCostUSD = 0
		sr, err := runShard(ctx, ShardOptions{Run: so, PlanDir: dir, Shard: k, OutDir: out})
		if !errors.Is(err, runner.ErrJobFailed) || !strings.Contains(err.Error(), "max_failures (1)") || sr.MaxCostUSD != 0.50 {
			t.Fatalf("shard %d: %v (budget %v), want a stop at its one failure under a $0.50 budget", k, err, sr.MaxCostUSD)
		}
		failed += sr.Failed
		outs = append(outs, out)
	}
	if failed != 2 {
		t.Fatalf("%d items failed over the shards, max_failures is 2", failed)
	}
	// Running a stopped shard again cannot finish its items before a fix,
	// so gather closes both at once (no --final needed) and names the
	// --from-pending plan.
	g := r.clone("g")
	res, err := gatherJob(ctx, GatherOptions{Run: shardOpts(g, o), PlanDir: dir, Outputs: outs})
	if !errors.Is(err, runner.ErrJobFailed) || !strings.Contains(err.Error(), "shard 0 (stopped: max_failures (1) reached)") ||
		!strings.Contains(err.Error(), "--from-pending job-1") || res.Pending != 6 || res.Failed != 2 || res.Successful != 0 {
		t.Fatalf("gather of cut-off shards = %+v, %v, want both closed as stopped, 6 pending and the --from-pending command", res, err)
	}
	// Continue the pending items (now fixed) as a new sharded job.
	if err := os.WriteFile(fixed, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	o2 := shardOpts(g, o)
	o2.Workflow, o2.JobID = wf, "job-2"
	dir2 := filepath.Join(t.TempDir(), "plan2")
	plan2, err := planJob(ctx, PlanOptions{Run: o2, Dir: dir2, Shards: 2, FromPending: "job-1"})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, it := range plan2.Items {
		ids = append(ids, it.ID)
	}
	if want := "item_1 item_2 item_3 item_5 item_6 item_7"; strings.Join(ids, " ") != want {
		t.Fatalf("--from-pending planned %v, want %s", ids, want)
	}
	outs2 := runAllShards(t, r, dir2, o, 2)
	res, err = gatherJob(ctx, GatherOptions{Run: shardOpts(g, o), PlanDir: dir2, Outputs: outs2})
	if err != nil || res.Successful != 6 {
		t.Fatalf("continuation gather = %+v, %v", res, err)
	}
	if got := g.Git("show", "prodigy/job-2:count.txt"); strings.TrimSpace(got) != "6" {
		t.Fatalf("the continuation's reduce counted %s files", got)
	}
}
