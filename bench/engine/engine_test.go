package main

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os/exec"
	"reflect"
	"strings"
	"testing"
)

// TestSmoke runs the whole harness on a tiny repository (50 files, 5 items,
// a two-point sweep and the git profile) and checks the shape of its JSON
// report. It asserts no timings, only that every run completed with the same
// merged tree and that the figures were filled in.
func TestSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the whole benchmark harness (about a minute); skipped with -short")
	}
	for _, tool := range []string{"git", "bash", "flock", "xargs", "go"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s: %v", tool, err)
		}
	}
	var stdout, stderr bytes.Buffer
	args := []string{"-files", "50", "-size-mb", "0.2", "-n", "5", "-json", "-dir", t.TempDir(),
		"-sweep", "-sweep-p", "1,2", "-sweep-n", "3", "-profile"}
	if code := run(context.Background(), args, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d\nstderr:\n%s", code, stderr.String())
	}
	raw := stdout.String()
	var rep report
	dec := json.NewDecoder(&stdout)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rep); err != nil {
		t.Fatalf("stdout is not one report object: %v\n%s", err, raw)
	}
	if dec.More() {
		t.Fatal("stdout holds more than one JSON value")
	}
	if rep.Repo.Files != 50 || rep.N != 5 || rep.MaxParallel != 2 || !rep.IdenticalTrees || rep.MergedTree == "" {
		t.Errorf("report header = %+v", rep)
	}
	ms := []measurement{rep.Baseline, rep.Strong, rep.Engine}
	if rep.Before == nil {
		t.Fatal("engine_before missing")
	}
	ms = append(ms, *rep.Before)
	for _, m := range ms {
		if m.Tree != rep.MergedTree || m.WallMS <= 0 || m.ItemsPerSec <= 0 || m.PeakRSSKB <= 0 || m.CPUSeconds <= 0 || m.N != 5 {
			t.Errorf("%s measurement = %+v", m.Kind, m)
		}
	}
	if rep.Engine.TimingsMS == nil || rep.Before.TimingsMS == nil || rep.Baseline.TimingsMS != nil {
		t.Errorf("timings_ms: engine %v, before %v, baseline %v", rep.Engine.TimingsMS, rep.Before.TimingsMS, rep.Baseline.TimingsMS)
	}
	if rep.EngineItemMS == nil || rep.EngineItemMS.Steps <= 0 {
		t.Errorf("engine_item_overhead_ms = %+v", rep.EngineItemMS)
	}
	if rep.Speedup <= 0 || rep.BeforeSpeedup <= 0 || rep.StrongSpeedup <= 0 || rep.StrongCPUSpeedup <= 0 {
		t.Errorf("speedups = %v, %v, strong %v / CPU %v", rep.Speedup, rep.BeforeSpeedup, rep.StrongSpeedup, rep.StrongCPUSpeedup)
	}
	if rep.Strong.Kind != kindStrong || rep.Strong.TimingsMS != nil {
		t.Errorf("strong_baseline = %+v", rep.Strong)
	}
	for _, key := range []string{`"speedup_vs_git_baseline"`, `"speedup_vs_strong_baseline"`, `"cpu_speedup_vs_strong_baseline"`, `"cpu_s"`} {
		if !strings.Contains(raw, key) {
			t.Errorf("JSON lacks %s", key)
		}
	}
	var points []string
	for _, r := range rep.Sweep {
		points = append(points, r.Axis)
		if r.Engine.Tree == "" || r.Engine.Tree != r.Baseline.Tree || r.Engine.Tree != r.Strong.Tree || r.Speedup <= 0 || r.StrongSpeedup <= 0 {
			t.Errorf("sweep row %+v", r)
		}
	}
	if strings.Join(points, ",") != "max_parallel,max_parallel,n" {
		t.Errorf("sweep axes = %v, want max_parallel,max_parallel,n", points)
	}
	if len(rep.Profile) != 3 {
		t.Fatalf("profile has %d runs, want 3", len(rep.Profile))
	}
	for _, p := range rep.Profile {
		// Every item commits once, in the engine and in both baselines.
		commits := 0.0
		for _, c := range p.Commands {
			if c.Hierarchy == "commit" {
				commits = c.ProcessesPerItem
			}
		}
		if commits != 1 || p.TopLevelPerItem < 2 {
			t.Errorf("%s profile: commit processes per item %v, top-level %v", p.Kind, commits, p.TopLevelPerItem)
		}
	}
}

// TestVerifyContentDetectsMissingItem checks that verification fails loudly
// when the results branch lacks an item's file or has a wrong one.
func TestVerifyContentDetectsMissingItem(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	template := dir + "/template.git"
	if _, err := makeTemplate(ctx, template, 3, 0.01, 1); err != nil {
		t.Fatal(err)
	}
	repo := dir + "/repo"
	if err := cloneRepo(ctx, template, repo); err != nil {
		t.Fatal(err)
	}
	sh := func(script string) {
		t.Helper()
		cmd := exec.Command("bash", "-c", script)
		cmd.Dir = repo
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", script, err, out)
		}
	}
	sh("git checkout -q -b " + resultsBranch + " && mkdir out && printf 'item 1\\n' > out/item-1.txt && git add out && git commit -q -m one && git tag good")
	tests := []struct {
		name    string
		n       int
		setup   string
		wantErr string
	}{
		{name: "complete", n: 1},
		{name: "missing_item", n: 2, wantErr: "1 of the 2 item files"},
		{name: "wrong_content", n: 1, setup: "printf 'other\\n' > out/item-1.txt && git commit -qam wrong", wantErr: "has blob"},
		{name: "outside_out", n: 1, setup: "echo x >> src/m000/p0/f00000.txt && git commit -qam outside", wantErr: "outside out/"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sh("git reset -q --hard good")
			if tt.setup != "" {
				sh(tt.setup)
			}
			err := verifyContent(ctx, repo, tt.n)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("verifyContent: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("verifyContent = %v, want error containing %q", err, tt.wantErr)
			}
		})
	}
}

// TestSparseEngineOnly runs the engine alone with -sparse on one directory
// and checks the checkout-cost figures: the sparse worktree is smaller than
// the full one, time to first agent is measured, and the merged tree is
// still verified against every item (merges keep the whole tree).
func TestSparseEngineOnly(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the engine on a small repository; skipped with -short")
	}
	var stdout, stderr bytes.Buffer
	args := []string{"-files", "400", "-size-mb", "1", "-n", "4", "-max-parallel", "2", "-json", "-dir", t.TempDir(),
		"-baselines=false", "-sparse", "src/m000/p0"}
	if code := run(context.Background(), args, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d\nstderr:\n%s", code, stderr.String())
	}
	var rep report
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("report: %v\n%s", err, stdout.String())
	}
	c := rep.Checkout
	if c == nil {
		t.Fatal("no checkout figures")
	}
	if c.FullCheckoutMS <= 0 || c.FullDiskKB <= 0 || c.FullResetMS <= 0 || c.SparseResetMS <= 0 || c.SparseCheckoutMS <= 0 {
		t.Errorf("checkout = %+v", c)
	}
	if c.SparseDiskKB <= 0 || c.SparseDiskKB >= c.FullDiskKB || c.SparseDiskRatio >= 0.5 {
		t.Errorf("sparse disk %d KiB vs full %d KiB (ratio %v)", c.SparseDiskKB, c.FullDiskKB, c.SparseDiskRatio)
	}
	if strings.Join(c.Sparse, ",") != "src/m000/p0,out" {
		t.Errorf("sparse dirs = %q", c.Sparse)
	}
	if rep.Engine.ResultMS <= 0 || rep.Engine.ResultMS > rep.Engine.WallMS {
		t.Errorf("result_ms %v (wall %v ms)", rep.Engine.ResultMS, rep.Engine.WallMS)
	}
	if rep.Engine.FirstCheckoutMS <= 0 || rep.Engine.FirstAgentVsOwnCheckout <= 0 {
		t.Errorf("the engine's own first slot checkout was not timed: %+v", rep.Engine)
	}
	if rep.Engine.FirstAgentMS <= 0 || rep.FirstAgentRatio <= 0 || rep.Engine.Tree == "" || !strings.Contains(rep.Engine.Description, "--sparse src/m000/p0") {
		t.Errorf("engine = %+v, first-agent ratio %v", rep.Engine, rep.FirstAgentRatio)
	}
	if rep.Baseline.WallMS != 0 || rep.Strong.WallMS != 0 || rep.Before != nil {
		t.Error("baselines ran with -baselines=false")
	}
}

// TestSizeSweepAndSplitSmoke runs the size sweep on a tiny repository with
// the CPU split and checks the report's shape: one row with one run per
// kind, the ratios, and a split per kind that saw the git processes each
// side starts (the script's merge-tree, the agent's commit in the engine).
func TestSizeSweepAndSplitSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the harness; skipped with -short")
	}
	for _, tool := range []string{"git", "bash", "flock", "go"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s: %v", tool, err)
		}
	}
	var stdout, stderr bytes.Buffer
	args := []string{"-files", "50", "-size-mb", "0.2", "-sweep-files", "40", "-sweep-n", "4", "-repeat", "1", "-split", "-json", "-dir", t.TempDir()}
	if code := run(context.Background(), args, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d\nstderr:\n%s", code, stderr.String())
	}
	var rep report
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Sizes) != 1 {
		t.Fatalf("size sweep rows = %+v", rep.Sizes)
	}
	r := rep.Sizes[0]
	if r.Files != 40 || r.N != 4 || len(r.Strong) != 1 || len(r.Engine) != 1 || r.WallRatio <= 0 || r.CPURatio <= 0 || len(r.Split) != 2 || r.EngineMergeMS <= 0 {
		t.Fatalf("row = %+v", r)
	}
	has := func(s cpuSplit, cmd string) bool {
		for _, c := range s.Git {
			if c.Command == cmd && c.ProcessesPerItem > 0 {
				return true
			}
		}
		return false
	}
	if s := r.Split[0]; s.Kind != kindStrong || !has(s, "script merge-tree") || s.GitProcessesPerItem < 8 {
		t.Errorf("strong split = %+v", s)
	}
	if s := r.Split[1]; s.Kind != kindEngine || !has(s, "agent commit") || !has(s, "engine checkout") || s.BashProcessesPerItem < 1 {
		t.Errorf("engine split = %+v", s)
	}
}

// TestMergeGrowth: the merge section's growth is taken per repository size,
// from its smallest N to its largest, and sizes swept at one N are skipped.
func TestMergeGrowth(t *testing.T) {
	rows := []sizeRow{
		{Files: 1000, N: 200, EngineMergeMS: 9},
		{Files: 1000, N: 100, EngineMergeMS: 8},
		{Files: 1000, N: 1000, EngineMergeMS: 10},
		{Files: 10000, N: 100, EngineMergeMS: 5},
	}
	got := mergeGrowth(rows)
	want := []mergeFlatness{{Files: 1000, MinN: 100, MaxN: 1000, MinMS: 8, MaxMS: 10, Ratio: 1.25}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("mergeGrowth = %+v, want %+v", got, want)
	}
}

// TestYardstickMeasuresTheFloorTwice runs -split -checkout on a tiny
// repository: the floor is measured before the runs and again after them,
// and the ratio is the engine's own CPU over their mean.
func TestYardstickMeasuresTheFloorTwice(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the engine on a small repository; skipped with -short")
	}
	var stdout, stderr bytes.Buffer
	args := []string{"-files", "200", "-size-mb", "0.5", "-n", "4", "-max-parallel", "2", "-json", "-dir", t.TempDir(),
		"-baselines=false", "-before=false", "-checkout", "-split"}
	if code := run(context.Background(), args, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d\nstderr:\n%s", code, stderr.String())
	}
	var rep report
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("report: %v\n%s", err, stdout.String())
	}
	y := rep.Yardstick
	if y == nil {
		t.Fatalf("no yardstick\nstderr:\n%s", stderr.String())
	}
	for name, f := range map[string]floorCost{"before": y.FloorBefore, "after": y.FloorAfter} {
		if f.CheckoutMS <= 0 || f.CheckoutCPUMS <= 0 || f.ResetMS <= 0 || f.ResetCPUMS <= 0 {
			t.Errorf("floor %s = %+v", name, f)
		}
	}
	if y.FloorBefore != (floorCost{CheckoutMS: rep.Checkout.FullCheckoutMS, CheckoutCPUMS: rep.Checkout.FullCheckoutCPUMS, ResetMS: rep.Checkout.FullResetMS, ResetCPUMS: rep.Checkout.FullResetCPUMS}) {
		t.Errorf("floor before %+v is not the checkout figures %+v", y.FloorBefore, rep.Checkout)
	}
	mean := (y.FloorBeforeMSPerItem + y.FloorAfterMSPerItem) / 2
	if math.Abs(y.FloorCPUMSPerItem-mean) > 0.02 || y.EngineOwnCPUMSPerItem <= 0 || math.Abs(y.Ratio-y.EngineOwnCPUMSPerItem/y.FloorCPUMSPerItem) > 0.02 {
		t.Errorf("yardstick = %+v (mean of the floors %.2f)", y, mean)
	}
	if !strings.Contains(stderr.String(), "floor before the runs") {
		t.Errorf("the log does not give both floors:\n%s", stderr.String())
	}
}

// TestStrongOwnLeavesOutTheAgentsGit: the strong script's own CPU is its
// git but the agents' add and commit (commit-tree is the script's merge).
func TestStrongOwnLeavesOutTheAgentsGit(t *testing.T) {
	splits := []cpuSplit{
		{Kind: kindEngine, Git: []gitCPU{{Command: "engine checkout", CPUMSPerItem: 100}}},
		{Kind: kindStrong, Git: []gitCPU{
			{Command: "script reset", CPUMSPerItem: 3},
			{Command: "script commit", CPUMSPerItem: 50},
			{Command: "script add", CPUMSPerItem: 40},
			{Command: "script commit-tree", CPUMSPerItem: 1},
			{Command: "script clean", CPUMSPerItem: 0.5},
		}},
	}
	if got := strongOwn(splits); got != 4.5 {
		t.Errorf("strongOwn = %v, want 4.5", got)
	}
	if got := strongOwn(splits[:1]); got != 0 {
		t.Errorf("strongOwn without a strong split = %v, want 0", got)
	}
}
