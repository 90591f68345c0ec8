// Command shards benchmarks the sharded fan-out (issue 15) on one machine:
// plan, then every shard in its own clone and its own process (outputs
// through directories, as matrix jobs would exchange artifacts), then
// gather in a fresh clone; it times each phase, reports gather's cost per
// shard and checks that every item is accounted for exactly once.
//
//	go run ./bench/shards                       # 10,000 items over 50 shards
//	go run ./bench/shards -n 500 -shards 10     # a quick run
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

type config struct {
	n, shards, jobs, maxParallel, failEvery int
	action, dir                             string
	keep, json                              bool
}

type shardTime struct {
	Shard   int     `json:"shard"`
	Items   int     `json:"items"`
	CloneS  float64 `json:"clone_s"`
	ShardS  float64 `json:"shard_s"`
	ExitErr string  `json:"error,omitempty"`
}

type report struct {
	N               int     `json:"n"`
	Shards          int     `json:"shards"`
	ConcurrentJobs  int     `json:"concurrent_shard_processes"`
	MaxParallel     int     `json:"max_parallel_per_shard"`
	PlanS           float64 `json:"plan_s"`
	ShardPhaseS     float64 `json:"shard_phase_wall_s"`
	ShardMeanS      float64 `json:"shard_mean_s"`
	ShardMaxS       float64 `json:"shard_max_s"`
	GatherS         float64 `json:"gather_s"`
	GatherPerShardS float64 `json:"gather_per_shard_s"`
	// FetchVerifyS and MergeImportS are gather's two phases, as it logs
	// them: the outputs fetched and verified, then merged and imported in
	// plan order (issue 26's target: 50 shards gathered in ≤ 2× one
	// shard's gather plus the merges).
	FetchVerifyS  float64     `json:"gather_fetch_verify_s"`
	MergeImportS  float64     `json:"gather_merge_import_s"`
	RegatherS     float64     `json:"second_gather_s"`
	Successful    int         `json:"successful"`
	Failed        int         `json:"failed"`
	DLQCount      int         `json:"dlq_count"`
	FilesOnBranch int         `json:"result_files_on_branch"`
	AccountedOnce bool        `json:"every_item_accounted_once"`
	PerShard      []shardTime `json:"per_shard"`
}

func main() {
	var c config
	flag.IntVar(&c.n, "n", 10000, "items")
	flag.IntVar(&c.shards, "shards", 50, "shards")
	flag.IntVar(&c.jobs, "j", 2, "shard processes at once (runners)")
	flag.IntVar(&c.maxParallel, "max-parallel", 2, "agents at once in each shard")
	flag.IntVar(&c.failEvery, "fail-every", 100, "every k-th item fails (0: none)")
	flag.StringVar(&c.action, "action", "", "prebuilt CLI (default: go build ./cmd/action)")
	flag.StringVar(&c.dir, "dir", "", "work directory (default: a temp dir)")
	flag.BoolVar(&c.keep, "keep", false, "keep the work directory")
	flag.BoolVar(&c.json, "json", false, "print the report as JSON")
	flag.Parse()
	rep, err := run(context.Background(), c)
	if rep != nil {
		if c.json {
			b, _ := json.MarshalIndent(rep, "", "  ")
			fmt.Println(string(b))
		} else {
			printText(rep)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func logf(format string, a ...any) { fmt.Fprintf(os.Stderr, format+"\n", a...) }

func sh(dir string, env []string, name string, args ...string) (string, error) {
	out, _, err := shLog(dir, env, name, args...)
	return out, err
}

// shLog is sh that also returns what the command wrote on stderr.
func shLog(dir string, env []string, name string, args ...string) (stdout, stderr string, err error) {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.String(), errb.String(), fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, lastLines(errb.String(), 20))
	}
	return out.String(), errb.String(), nil
}

// gatherPhases reads the durations gather logs for its two phases:
// fetching and verifying the shard outputs, and merging and importing
// them in plan order (0 when a line is missing).
func gatherPhases(log string) (fetch, merge float64) {
	for _, line := range strings.Split(log, "\n") {
		if _, rest, ok := strings.Cut(line, "fetched and verified in "); ok {
			fetch = seconds(rest)
		}
		if _, rest, ok := strings.Cut(line, "merged and imported in plan order in "); ok {
			merge = seconds(rest)
		}
	}
	return fetch, merge
}

// seconds parses the Go duration that starts s, in seconds (0 if none).
func seconds(s string) float64 {
	f, _, _ := strings.Cut(strings.TrimSpace(s), " ")
	d, err := time.ParseDuration(f)
	if err != nil {
		return 0
	}
	return d.Seconds()
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

const workflow = `name: shard-bench
mode: mapreduce
map:
  input: items.json
  max_parallel: %d
  agent_template:
    - shell: |
        if [ %d -gt 0 ] && [ $(( PRODIGY_ITEM_INDEX %% %d )) = $(( %d - 1 )) ]; then echo "planned failure" >&2; exit 3; fi
        mkdir -p out && printf 'item %%s\n' "$PRODIGY_ITEM_INDEX" > "out/item-$PRODIGY_ITEM_INDEX.txt"
        git add out && git commit -qm "item $PRODIGY_ITEM_INDEX"
error_policy:
  on_item_failure: dlq
reduce:
  - shell: ls out | wc -l | tr -d ' ' > reduce.txt && git add reduce.txt && git commit -qm reduce
`

func run(ctx context.Context, c config) (*report, error) {
	if c.dir == "" {
		d, err := os.MkdirTemp("", "shard-bench-")
		if err != nil {
			return nil, err
		}
		c.dir = d
	}
	if !c.keep {
		defer os.RemoveAll(c.dir)
	}
	ident := []string{"GIT_AUTHOR_NAME=bench", "GIT_AUTHOR_EMAIL=bench@example.invalid", "GIT_COMMITTER_NAME=bench", "GIT_COMMITTER_EMAIL=bench@example.invalid"}
	if c.action == "" {
		c.action = filepath.Join(c.dir, "action")
		logf("building the CLI")
		if _, err := sh(".", nil, "go", "build", "-o", c.action, "./cmd/action"); err != nil {
			return nil, err
		}
	}
	origin := filepath.Join(c.dir, "origin")
	if err := os.MkdirAll(origin, 0o755); err != nil {
		return nil, err
	}
	items := make([]string, c.n)
	for i := range items {
		items[i] = fmt.Sprintf(`{"n":%d}`, i)
	}
	if err := os.WriteFile(filepath.Join(origin, "items.json"), []byte("["+strings.Join(items, ",")+"]\n"), 0o644); err != nil {
		return nil, err
	}
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "."}, {"commit", "-qm", "items"}} {
		if _, err := sh(origin, ident, "git", args...); err != nil {
			return nil, err
		}
	}
	wf := filepath.Join(c.dir, "workflow.yml")
	if err := os.WriteFile(wf, []byte(fmt.Sprintf(workflow, c.maxParallel, c.failEvery, max(c.failEvery, 1), max(c.failEvery, 1))), 0o644); err != nil {
		return nil, err
	}
	clone := func(name string) (string, error) {
		d := filepath.Join(c.dir, name)
		if _, err := sh(c.dir, nil, "git", "clone", "-q", "--no-local", origin, d); err != nil {
			return "", err
		}
		for _, kv := range [][2]string{{"gc.auto", "0"}, {"maintenance.auto", "false"}} {
			if _, err := sh(d, nil, "git", "config", kv[0], kv[1]); err != nil {
				return "", err
			}
		}
		return d, nil
	}
	action := func(home string, args ...string) (string, error) {
		return sh(c.dir, append([]string{"PRODIGY_HOME=" + home}, ident...), c.action, args...)
	}
	rep := &report{N: c.n, Shards: c.shards, ConcurrentJobs: c.jobs, MaxParallel: c.maxParallel}

	planner, err := clone("planner")
	if err != nil {
		return nil, err
	}
	planDir := filepath.Join(c.dir, "plan")
	logf("plan: %d items into %d shards", c.n, c.shards)
	t0 := time.Now()
	if _, err := action(filepath.Join(c.dir, "home-plan"), "plan", wf, "--out", planDir, "--shards", strconv.Itoa(c.shards), "--repo", planner, "--job-id", "bench"); err != nil {
		return nil, err
	}
	rep.PlanS = time.Since(t0).Seconds()
	var plan struct {
		Shards []struct {
			Items []string `json:"items"`
		} `json:"shards"`
	}
	if data, err := os.ReadFile(filepath.Join(planDir, "plan.json")); err != nil || json.Unmarshal(data, &plan) != nil {
		return nil, fmt.Errorf("read plan.json: %v", err)
	}

	logf("shards: %d processes at a time", c.jobs)
	outs := make([]string, len(plan.Shards))
	rep.PerShard = make([]shardTime, len(plan.Shards))
	sem := make(chan struct{}, max(c.jobs, 1))
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	t0 = time.Now()
	for k := range plan.Shards {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			st := shardTime{Shard: k, Items: len(plan.Shards[k].Items)}
			defer func() { rep.PerShard[k] = st }()
			t := time.Now()
			repo, err := clone(fmt.Sprintf("shard-%d", k))
			st.CloneS = time.Since(t).Seconds()
			if err == nil {
				outs[k] = filepath.Join(c.dir, "outs", strconv.Itoa(k))
				t = time.Now()
				_, err = action(filepath.Join(c.dir, fmt.Sprintf("home-%d", k)), "shard", planDir, strconv.Itoa(k), "--out", outs[k], "--repo", repo)
				st.ShardS = time.Since(t).Seconds()
			}
			if err != nil {
				st.ExitErr = err.Error()
				mu.Lock()
				if firstErr == nil {
					firstErr = fmt.Errorf("shard %d: %w", k, err)
				}
				mu.Unlock()
			}
			if !c.keep && repo != "" {
				_ = os.RemoveAll(repo)
			}
			logf("  shard %d: %d items in %.1fs", k, st.Items, st.ShardS)
		}()
	}
	wg.Wait()
	rep.ShardPhaseS = time.Since(t0).Seconds()
	if firstErr != nil {
		return rep, firstErr
	}
	var sum float64
	for _, st := range rep.PerShard {
		sum += st.ShardS
		rep.ShardMaxS = max(rep.ShardMaxS, st.ShardS)
	}
	rep.ShardMeanS = sum / float64(len(rep.PerShard))

	g, err := clone("gatherer")
	if err != nil {
		return rep, err
	}
	homeG := filepath.Join(c.dir, "home-gather")
	logf("gather")
	t0 = time.Now()
	out, glog, err := shLog(c.dir, append([]string{"PRODIGY_HOME=" + homeG}, ident...), c.action, append([]string{"gather", planDir, "--repo", g, "--json"}, outs...)...)
	rep.GatherS = time.Since(t0).Seconds()
	rep.FetchVerifyS, rep.MergeImportS = gatherPhases(glog)
	rep.GatherPerShardS = rep.GatherS / float64(len(outs))
	if err != nil {
		return rep, err
	}
	var res struct {
		Total, Successful, Failed, Pending int
		DLQCount                           int `json:"dlq_count"`
		Items                              []struct {
			ItemID string `json:"item_id"`
			State  string `json:"state"`
		} `json:"items"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		return rep, fmt.Errorf("gather --json: %w", err)
	}
	rep.Successful, rep.Failed, rep.DLQCount = res.Successful, res.Failed, res.DLQCount
	t0 = time.Now()
	if _, err := action(homeG, append([]string{"gather", planDir, "--repo", g}, outs...)...); err != nil {
		return rep, fmt.Errorf("second gather: %w", err)
	}
	rep.RegatherS = time.Since(t0).Seconds()

	ls, err := sh(g, nil, "git", "ls-tree", "--name-only", "prodigy/bench:out/")
	if err != nil {
		return rep, err
	}
	rep.FilesOnBranch = len(strings.Fields(ls))
	reduced, _ := sh(g, nil, "git", "show", "prodigy/bench:reduce.txt")
	seen := map[string]int{}
	for _, it := range res.Items {
		seen[it.ItemID]++
	}
	wantFailed := 0
	if c.failEvery > 0 {
		wantFailed = c.n / c.failEvery
	}
	once := len(seen) == c.n && len(res.Items) == c.n
	for _, v := range seen {
		once = once && v == 1
	}
	rep.AccountedOnce = once && res.Total == c.n && res.Pending == 0 && res.Successful+res.Failed == c.n &&
		res.Failed == wantFailed && res.DLQCount == wantFailed && rep.FilesOnBranch == res.Successful &&
		strings.TrimSpace(reduced) == strconv.Itoa(res.Successful)
	if !rep.AccountedOnce {
		return rep, fmt.Errorf("bookkeeping mismatch: total %d, successful %d, failed %d (want %d), pending %d, DLQ %d, files %d, reduce %q, distinct ids %d",
			res.Total, res.Successful, res.Failed, wantFailed, res.Pending, res.DLQCount, rep.FilesOnBranch, strings.TrimSpace(reduced), len(seen))
	}
	return rep, nil
}

func printText(r *report) {
	fmt.Printf("sharded fan-out: %d items, %d shards, %d shard process(es) at a time, max_parallel %d per shard\n", r.N, r.Shards, r.ConcurrentJobs, r.MaxParallel)
	fmt.Printf("  plan            %8.1f s\n", r.PlanS)
	fmt.Printf("  shards (wall)   %8.1f s   mean %.1f s, max %.1f s per shard\n", r.ShardPhaseS, r.ShardMeanS, r.ShardMaxS)
	fmt.Printf("  gather          %8.1f s   %.2f s per shard (fetch and verify %.2f s, merge and import %.2f s)\n", r.GatherS, r.GatherPerShardS, r.FetchVerifyS, r.MergeImportS)
	fmt.Printf("  second gather   %8.1f s   (no-op)\n", r.RegatherS)
	fmt.Printf("  items: %d merged, %d failed (DLQ %d), %d result files; every item accounted for once: %v\n", r.Successful, r.Failed, r.DLQCount, r.FilesOnBranch, r.AccountedOnce)
	slow := append([]shardTime(nil), r.PerShard...)
	sort.Slice(slow, func(a, b int) bool { return slow[a].ShardS > slow[b].ShardS })
	if len(slow) > 3 {
		slow = slow[:3]
	}
	for _, s := range slow {
		fmt.Printf("  slowest: shard %d, %d items, %.1f s (clone %.1f s)\n", s.Shard, s.Items, s.ShardS, s.CloneS)
	}
}
