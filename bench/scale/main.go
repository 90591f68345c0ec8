// Command scale benchmarks the engine's bookkeeping at scale (issue 11):
// no-op map items (a shell step that does nothing and makes no commit) at
// N = 1,000 / 10,000 / 1,000,000 with max_parallel 8, each job run by the
// real CLI in its own process on a real git repository, with a fresh
// PRODIGY_HOME.
//
//	go run ./bench/scale                                # N=1000,10000 in full; N=1000000 for a 120 s window
//	go run ./bench/scale -n 1000,10000 -json
//	go run ./bench/scale -n 1000000 -window 60s -window-items 5000
//	go run ./bench/scale -commits 1000 -files 1000 -max-parallel 2 -n 1000,10000,100000
//
// With -commits K (issue 26) every item does real work: its agent writes
// out/item-<index mod K>.txt and commits it, so every item is merged into
// the results branch, and the repository (-files F files under src/, plus
// out/) stops growing after K items, as bench/engine's -slots. The report
// then adds the CPU of the runner's whole process tree per item (its own
// plus every child it reaped: git, the agents' bash and git) over the same
// window, and the mean merge section per merged item (timings_ms.merge of
// `status --json`), with their ratios to the mean of the N=1,000 runs
// (list 1000 twice, first and last, to bracket the machine's drift).
//
// Per N it reports:
//
//   - first_item_s: from the runner's process start to the first
//     agent_started event in events.jsonl (its timestamp);
//   - throughput (items/s) over the steady-state window: between the
//     samples where 10 % and 90 % of the target items had finished
//     (agent_completed events); the target is N for full runs, or the
//     items finished when a window ends (-window / -window-items, then
//     SIGINT);
//   - bookkeeping_cpu_ms_per_item: the runner process's own CPU time
//     (utime+stime of its /proc/PID/stat, not its children: no git, no
//     bash) over the same window divided by the items finished in it —
//     the engine's own cost per item, independent of how busy the
//     machine's other jobs keep the CPUs;
//   - wall_ms_per_item: 1000 / throughput (items run 8 at a time);
//   - peak RSS of the runner: its VmHWM (/proc/PID/status), sampled
//     until it exits, and wait4's ru_maxrss;
//   - the wall time of `status JOB` and `status JOB --json` on the
//     finished (or interrupted) job, each a separate process.
//
// A windowed run must leave a resumable job: after the SIGINT, `status
// --json` must count every item (merged + pending = N, none running, no
// DLQ). The exit code is 1 if a check fails.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"
)

const jobPrefix = "scale-"

type config struct {
	ns             []int
	maxParallel    int
	windowFrom     int // N at or above which a run is windowed
	window         time.Duration
	windowItems    int
	action, dir    string
	statusBaseline string
	keep, json     bool
	commits        int // -commits: items commit out/item-<i mod K>.txt (0: no-op items)
	files          int // -files: files under src/ in the repository
	resume         time.Duration
}

// Run is one measured job.
type Run struct {
	N             int     `json:"n"`
	MaxParallel   int     `json:"max_parallel"`
	Windowed      bool    `json:"windowed"`
	InputBytes    int64   `json:"input_bytes"`
	FirstItemS    float64 `json:"first_item_s"`
	WallS         float64 `json:"wall_s"`
	Finished      int     `json:"items_finished"`
	WindowItems   int     `json:"window_items"`
	WindowS       float64 `json:"window_s"`
	ItemsPerS     float64 `json:"items_per_s"`
	WallMSPerItem float64 `json:"wall_ms_per_item"`
	CPUMSPerItem  float64 `json:"bookkeeping_cpu_ms_per_item"`
	RunnerCPUS    float64 `json:"runner_cpu_s"`
	PeakRSSMiB    float64 `json:"peak_rss_mib"`
	MaxrssMiB     float64 `json:"ru_maxrss_mib"`
	StatusS       float64 `json:"status_s"`
	StatusJSONS   float64 `json:"status_json_s"`
	StatusJSONB   int     `json:"status_json_bytes"`
	// StatusJSONFirstS is when `status --json` wrote its first byte,
	// StatusJSONRSSMiB its peak RSS (ru_maxrss).
	StatusJSONFirstS float64 `json:"status_json_first_byte_s"`
	StatusJSONRSSMiB float64 `json:"status_json_rss_mib"`
	// The same for -status-baseline's binary (0 without one).
	BaselineJSONS      float64 `json:"baseline_status_json_s,omitempty"`
	BaselineJSONFirstS float64 `json:"baseline_status_json_first_byte_s,omitempty"`
	BaselineJSONRSSMiB float64 `json:"baseline_status_json_rss_mib,omitempty"`
	Merged             int     `json:"merged"`
	Pending            int     `json:"pending"`
	Running            int     `json:"running"`
	DLQ                int     `json:"dlq"`
	JobStatus          string  `json:"job_status"`
	CheckOK            bool    `json:"check_ok"`
	CheckError         string  `json:"check_error,omitempty"`
	// With -commits: the process tree's CPU per item over the window (the
	// runner plus every child it reaped) and the mean merge section of the
	// merged items (ms).
	TreeCPUMSPerItem float64 `json:"tree_cpu_ms_per_item,omitempty"`
	MergeMSPerItem   float64 `json:"merge_ms_per_item,omitempty"`
	// With -resume: the windowed job resumed (`resume JOB`, SIGINT after
	// -resume from its first item): when its first item started after
	// the command started, its peak RSS and the items it finished.
	ResumeFirstItemS float64 `json:"resume_first_item_s,omitempty"`
	ResumePeakMiB    float64 `json:"resume_peak_rss_mib,omitempty"`
	ResumeFinished   int     `json:"resume_items_finished,omitempty"`
}

// Report is the -json output.
type Report struct {
	Runs []Run `json:"runs"`
	// Ratios measured in this invocation (0 when a run is missing).
	BookkeepingRatio10k float64 `json:"bookkeeping_10k_over_1k"`
	WallPerItemRatio10k float64 `json:"wall_per_item_10k_over_1k"`
	Throughput1MOver1k  float64 `json:"throughput_1m_over_1k"`
	// With -commits: per-item ratios to N=1,000's, by N (runner's own CPU,
	// the process tree's CPU, the merge section, peak RSS).
	Commits []CommitRatio `json:"commit_ratios,omitempty"`
	// CommitSlots is -commits (0: no-op items).
	CommitSlots int    `json:"commits,omitempty"`
	CPUs        int    `json:"cpus"`
	Load        string `json:"loadavg"`
}

func main() {
	var c config
	ns := flag.String("n", "1000,10000,1000000", "item counts, comma separated")
	flag.IntVar(&c.maxParallel, "max-parallel", 8, "max_parallel")
	flag.IntVar(&c.windowFrom, "window-from", 100000, "runs with N at or above this are windowed (SIGINT after -window or -window-items)")
	flag.DurationVar(&c.window, "window", 120*time.Second, "length of a windowed run, from the first item started")
	flag.IntVar(&c.windowItems, "window-items", 0, "end a windowed run after this many items finished (0: time only)")
	flag.StringVar(&c.action, "action", "", "prebuilt CLI (default: go build ./cmd/action)")
	flag.StringVar(&c.statusBaseline, "status-baseline", "", "another build of the CLI (e.g. of an older commit) whose `status --json` is measured on the same job")
	flag.StringVar(&c.dir, "dir", "", "work directory (default: a temp dir)")
	flag.BoolVar(&c.keep, "keep", false, "keep the work directory")
	flag.BoolVar(&c.json, "json", false, "print one JSON object")
	flag.IntVar(&c.commits, "commits", 0, "items write and commit out/item-<index mod K>.txt (0: no-op items that commit nothing)")
	flag.IntVar(&c.files, "files", 0, "files under src/ in the repository (4 KiB each)")
	flag.DurationVar(&c.resume, "resume", 0, "after a windowed run, resume the job for this long from its first item (0: do not)")
	flag.Parse()
	for _, s := range strings.Split(*ns, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n <= 0 {
			fmt.Fprintf(os.Stderr, "-n: bad count %q\n", s)
			os.Exit(2)
		}
		c.ns = append(c.ns, n)
	}
	rep, err := run(c)
	if rep != nil {
		if c.json {
			b, _ := json.MarshalIndent(rep, "", "  ")
			fmt.Println(string(b))
		} else {
			printText(os.Stdout, rep)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func logf(format string, a ...any) { fmt.Fprintf(os.Stderr, format+"\n", a...) }

func run(c config) (*Report, error) {
	dir := c.dir
	if dir == "" {
		d, err := os.MkdirTemp("", "scale-bench-")
		if err != nil {
			return nil, err
		}
		dir = d
	}
	if c.keep {
		logf("work directory: %s", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	bin := c.action
	if bin == "" {
		bin = filepath.Join(dir, "action")
		logf("building the CLI …")
		build := exec.Command("go", "build", "-o", bin, "github.com/prodigy-action/prodigy-action/cmd/action")
		build.Stderr = os.Stderr
		if err := build.Run(); err != nil {
			return nil, fmt.Errorf("build the action binary: %w", err)
		}
	}
	rep := &Report{CPUs: runtime.NumCPU(), CommitSlots: c.commits}
	var failed []string
	for _, n := range c.ns {
		r, err := runOne(c, bin, dir, n)
		if err != nil {
			return rep, fmt.Errorf("run of %d items: %w", n, err)
		}
		if !r.CheckOK {
			failed = append(failed, fmt.Sprintf("run of %d items: %s", n, r.CheckError))
		}
		rep.Runs = append(rep.Runs, *r)
		if !c.keep {
			_ = os.RemoveAll(filepath.Join(dir, fmt.Sprint(n)))
		}
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		rep.Load = strings.TrimSpace(string(b))
	}
	by := map[int]Run{}
	for _, r := range rep.Runs {
		by[r.N] = r
	}
	if a, b := by[1000], by[10000]; a.CPUMSPerItem > 0 && b.CPUMSPerItem > 0 {
		rep.BookkeepingRatio10k = b.CPUMSPerItem / a.CPUMSPerItem
		rep.WallPerItemRatio10k = b.WallMSPerItem / a.WallMSPerItem
	}
	if a, b := by[1000], by[1000000]; a.ItemsPerS > 0 && b.ItemsPerS > 0 {
		rep.Throughput1MOver1k = b.ItemsPerS / a.ItemsPerS
	}
	if c.commits > 0 {
		rep.Commits = commitRatios(rep.Runs)
	}
	if len(failed) > 0 {
		return rep, errors.New(strings.Join(failed, "; "))
	}
	return rep, nil
}

const workflow = `name: scale-bench
mode: mapreduce
map:
  input: items.json
  id_field: id
  max_parallel: %d
  agent_template:
    - shell: 'true'
`

// commitWorkflow is the -commits workflow: each agent writes its slot's
// file and commits it (bench/engine's agent script with -slots).
const commitWorkflow = `name: scale-bench-commits
mode: mapreduce
map:
  input: items.json
  id_field: id
  max_parallel: %d
  agent_template:
    - shell: |
        mkdir -p out
        printf 'item %%s\n' "${item.id}" > "out/item-${item.slot}.txt"
        git add "out/item-${item.slot}.txt"
        git commit -q -m "item ${item.id}"
`

// writeSources writes n files of 4 KiB under src/ (n/100 directories).
func writeSources(repo string, n int) error {
	line := strings.Repeat("x", 63) + "\n"
	body := strings.Repeat(line, 64)
	for i := range n {
		d := filepath.Join(repo, "src", fmt.Sprintf("d%03d", i/100))
		if i%100 == 0 {
			if err := os.MkdirAll(d, 0o755); err != nil {
				return err
			}
		}
		if err := os.WriteFile(filepath.Join(d, fmt.Sprintf("f%05d.txt", i)), []byte(fmt.Sprintf("file %d\n%s", i, body)), 0o644); err != nil {
			return err
		}
	}
	return nil
}

var gitEnv = []string{"GIT_AUTHOR_NAME=bench", "GIT_AUTHOR_EMAIL=bench@example.com",
	"GIT_COMMITTER_NAME=bench", "GIT_COMMITTER_EMAIL=bench@example.com", "GITHUB_ACTIONS="}

// setupRepo makes a git repository with items.json (n items, written as a
// stream) and the workflow, committed.
func setupRepo(dir string, n int, c config) (int64, error) {
	repo := filepath.Join(dir, "repo")
	if err := os.MkdirAll(repo, 0o755); err != nil {
		return 0, err
	}
	f, err := os.Create(filepath.Join(repo, "items.json"))
	if err != nil {
		return 0, err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	w.WriteString("[\n")
	for i := range n {
		sep := ",\n"
		if i == n-1 {
			sep = "\n"
		}
		slot := 0
		if c.commits > 0 {
			slot = i % c.commits
		}
		fmt.Fprintf(w, `{"id":"item-%07d","path":"src/file%d.go","priority":%d,"slot":%d}%s`, i, i, i%10, slot, sep)
	}
	w.WriteString("]\n")
	if err := errors.Join(w.Flush(), f.Close()); err != nil {
		return 0, err
	}
	st, err := os.Stat(filepath.Join(repo, "items.json"))
	if err != nil {
		return 0, err
	}
	wf := fmt.Sprintf(workflow, c.maxParallel)
	if c.commits > 0 {
		wf = fmt.Sprintf(commitWorkflow, c.maxParallel)
	}
	if err := os.WriteFile(filepath.Join(repo, "workflow.yml"), []byte(wf), 0o644); err != nil {
		return 0, err
	}
	if err := writeSources(repo, c.files); err != nil {
		return 0, err
	}
	if err := os.WriteFile(filepath.Join(repo, "README"), []byte("scale bench\n"), 0o644); err != nil {
		return 0, err
	}
	for _, args := range [][]string{
		{"init", "-q", "-b", "main"},
		{"config", "gc.auto", "0"},
		{"config", "maintenance.auto", "false"},
		{"add", "."},
		{"commit", "-qm", "init"},
	} {
		cmd := exec.Command("git", args...)
		cmd.Dir = repo
		cmd.Env = append(os.Environ(), gitEnv...)
		if out, err := cmd.CombinedOutput(); err != nil {
			return 0, fmt.Errorf("git %v: %w\n%s", args, err, out)
		}
	}
	return st.Size(), nil
}

// sample is one poll of the runner.
type sample struct {
	at         time.Time
	cpuTicks   int64 // utime+stime of the runner itself
	childTicks int64 // cutime+cstime: the children it reaped
	finished   int
}

func runOne(c config, bin, root string, n int) (*Run, error) {
	dir := filepath.Join(root, fmt.Sprint(n))
	home := filepath.Join(dir, "home")
	if err := os.MkdirAll(home, 0o755); err != nil {
		return nil, err
	}
	logf("N=%d: writing %d items …", n, n)
	size, err := setupRepo(dir, n, c)
	if err != nil {
		return nil, err
	}
	repo := filepath.Join(dir, "repo")
	jobID := fmt.Sprintf("%s%d", jobPrefix, n)
	windowed := n >= c.windowFrom
	r := &Run{N: n, MaxParallel: c.maxParallel, Windowed: windowed, InputBytes: size}

	env := append(os.Environ(), gitEnv...)
	env = append(env, "PRODIGY_HOME="+home)
	cmd := exec.Command(bin, "run", "workflow.yml", "--repo", repo, "--job-id", jobID)
	cmd.Dir = repo
	cmd.Env = env
	var errb tail
	cmd.Stdout = io.Discard
	cmd.Stderr = &errb
	logf("N=%d: running (windowed: %v) …", n, windowed)
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	pid := cmd.Process.Pid
	done := make(chan struct{})
	var (
		mu      sync.Mutex
		samples []sample
		hwmKiB  int64
		firstAt time.Time
		ev      = &eventTail{path: filepath.Join(home, "events", "repo", jobID, "events.jsonl")}
		stopped bool
	)
	go func() {
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			h := vmHWM(pid)
			ticks, children := cpuTicks(pid)
			ev.poll()
			mu.Lock()
			hwmKiB = max(hwmKiB, h)
			if ticks >= 0 {
				samples = append(samples, sample{at: time.Now(), cpuTicks: ticks, childTicks: children, finished: ev.finished})
			}
			if firstAt.IsZero() && !ev.firstStart.IsZero() {
				firstAt = ev.firstStart
			}
			if windowed && !stopped && !firstAt.IsZero() &&
				(time.Since(firstAt) >= c.window || (c.windowItems > 0 && ev.finished >= c.windowItems)) {
				stopped = true
				_ = cmd.Process.Signal(syscall.SIGINT)
			}
			mu.Unlock()
		}
	}()
	werr := cmd.Wait()
	close(done)
	r.WallS = time.Since(start).Seconds()
	ev.poll()
	mu.Lock()
	defer mu.Unlock()
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		r.MaxrssMiB = float64(ru.Maxrss) / 1024
	}
	r.PeakRSSMiB = float64(max(hwmKiB, 0)) / 1024
	if werr != nil && !(windowed && stopped) {
		return nil, fmt.Errorf("run: %w\n%s", werr, errb.String())
	}
	if ev.firstStart.IsZero() {
		return nil, fmt.Errorf("no agent_started event in %s\n%s", ev.path, errb.String())
	}
	r.FirstItemS = ev.firstStart.Sub(start).Seconds()
	r.Finished = ev.finished
	target := ev.finished
	if !windowed {
		target = n
	}
	windowStats(r, samples, target)

	// status, twice (text and JSON), each its own process.
	for _, asJSON := range []bool{false, true} {
		args := []string{"status", jobID}
		if asJSON {
			args = append(args, "--json")
		}
		var out firstByte
		d, rss, err := timeStatus(bin, args, repo, env, &out)
		if err != nil {
			return nil, err
		}
		if !asJSON {
			r.StatusS = d
			continue
		}
		r.StatusJSONS, r.StatusJSONB, r.StatusJSONFirstS, r.StatusJSONRSSMiB = d, out.Len(), out.first, rss
		var s struct {
			Status         string `json:"status"`
			TotalItems     int    `json:"total"`
			Successful     int    `json:"successful"`
			Failed         int    `json:"failed"`
			Skipped        int    `json:"skipped"`
			Pending        int    `json:"pending"`
			DLQCount       int    `json:"dlq_count"`
			ItemsByOutcome []struct {
				State   string `json:"state"`
				Timings *struct {
					Merge float64 `json:"merge"`
				} `json:"timings_ms"`
			} `json:"items"`
		}
		if err := json.Unmarshal(out.Bytes(), &s); err != nil {
			return nil, fmt.Errorf("status --json: %w (%.200s)", err, out.String())
		}
		r.JobStatus, r.Merged, r.DLQ = s.Status, s.Successful, s.DLQCount
		r.Pending = s.Pending
		var merges float64
		var timed int
		for _, it := range s.ItemsByOutcome {
			if it.State == "running" {
				r.Running++
			}
			if it.State == "merged" && it.Timings != nil {
				merges += it.Timings.Merge
				timed++
			}
		}
		if c.commits > 0 && timed > 0 {
			r.MergeMSPerItem = merges / float64(timed)
		}
		check(r, s.TotalItems, s.Failed, s.Skipped, windowed)
		if c.statusBaseline != "" {
			var base firstByte
			d, rss, err := timeStatus(c.statusBaseline, args, repo, env, &base)
			if err != nil {
				return nil, fmt.Errorf("baseline: %w", err)
			}
			r.BaselineJSONS, r.BaselineJSONFirstS, r.BaselineJSONRSSMiB = d, base.first, rss
			if !jsonEqual(base.Bytes(), out.Bytes()) {
				r.CheckOK = false
				r.CheckError += "; the baseline's status --json differs"
			}
		}
	}
	logf("N=%d: first item %.2f s, %.1f items/s, %.3f ms CPU/item, peak RSS %.1f MiB, status %.2f s, --json %.2f s, %s",
		n, r.FirstItemS, r.ItemsPerS, r.CPUMSPerItem, r.PeakRSSMiB, r.StatusS, r.StatusJSONS, r.JobStatus)
	if windowed && c.resume > 0 {
		if err := resumeOne(r, bin, repo, env, home, jobID, c.resume); err != nil {
			return nil, err
		}
		logf("N=%d: resumed: first item %.2f s, peak RSS %.1f MiB, %d item(s) finished", n, r.ResumeFirstItemS, r.ResumePeakMiB, r.ResumeFinished)
	}
	return r, nil
}

// resumeOne resumes the job for window from its first item (then SIGINT)
// and records when that item started, the peak RSS and the items
// finished; the job must end interrupted or completed.
func resumeOne(r *Run, bin, repo string, env []string, home, jobID string, window time.Duration) error {
	path := filepath.Join(home, "events", "repo", jobID, "events.jsonl")
	ev := &eventTail{path: path}
	if st, err := os.Stat(path); err == nil {
		ev.off = st.Size() // only this execution's events
	}
	cmd := exec.Command(bin, "resume", jobID)
	cmd.Dir, cmd.Env, cmd.Stdout = repo, env, io.Discard
	var errb tail
	cmd.Stderr = &errb
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return err
	}
	done, exited := make(chan struct{}), make(chan struct{})
	var hwm int64
	stopped := false
	go func() {
		defer close(exited)
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			hwm = max(hwm, vmHWM(cmd.Process.Pid))
			ev.poll()
			if !stopped && !ev.firstStart.IsZero() && time.Since(ev.firstStart) >= window {
				stopped = true
				_ = cmd.Process.Signal(syscall.SIGINT)
			}
		}
	}()
	werr := cmd.Wait()
	close(done)
	<-exited
	ev.poll()
	if werr != nil && !stopped {
		return fmt.Errorf("resume: %w\n%s", werr, errb.String())
	}
	if ev.firstStart.IsZero() {
		return fmt.Errorf("resume started no item\n%s", errb.String())
	}
	r.ResumeFirstItemS = ev.firstStart.Sub(start).Seconds()
	// VmHWM, as for the run: the child's ru_maxrss counts this process's
	// pages it shared before exec (this process has just read the whole
	// `status --json`).
	r.ResumePeakMiB = float64(hwm) / 1024
	r.ResumeFinished = ev.finished
	return nil
}

// check fills CheckOK: a full run completed with every item merged; a
// windowed one was interrupted with every item merged or pending.
func check(r *Run, total, failed, skipped int, windowed bool) {
	var problems []string
	if total != r.N {
		problems = append(problems, fmt.Sprintf("total_items %d, want %d", total, r.N))
	}
	if failed != 0 || skipped != 0 || r.DLQ != 0 || r.Running != 0 {
		problems = append(problems, fmt.Sprintf("failed %d, skipped %d, dlq %d, running %d: want none", failed, skipped, r.DLQ, r.Running))
	}
	if windowed && r.JobStatus == "completed" && r.Merged == r.N {
		// The job finished inside its window: a full run.
	} else if windowed {
		if r.JobStatus != "interrupted" {
			problems = append(problems, fmt.Sprintf("status %q, want interrupted", r.JobStatus))
		}
		if r.Merged+r.Pending != r.N {
			problems = append(problems, fmt.Sprintf("merged %d + pending %d != %d", r.Merged, r.Pending, r.N))
		}
		if r.Merged < r.Finished {
			problems = append(problems, fmt.Sprintf("merged %d < %d agent_completed events", r.Merged, r.Finished))
		}
	} else if r.JobStatus != "completed" || r.Merged != r.N {
		problems = append(problems, fmt.Sprintf("status %q with %d merged, want completed with %d", r.JobStatus, r.Merged, r.N))
	}
	r.CheckOK = len(problems) == 0
	r.CheckError = strings.Join(problems, "; ")
}

// windowStats computes the steady-state throughput and CPU per item
// between the samples where 10 % and 90 % of target items had finished.
func windowStats(r *Run, samples []sample, target int) {
	lo, hi := -1, -1
	for i, s := range samples {
		if lo < 0 && s.finished >= target/10 {
			lo = i
		}
		if s.finished >= target*9/10 {
			hi = i
			break
		}
	}
	if hi < 0 && len(samples) > 0 {
		hi = len(samples) - 1
	}
	if lo < 0 || hi <= lo {
		return
	}
	a, b := samples[lo], samples[hi]
	items := b.finished - a.finished
	secs := b.at.Sub(a.at).Seconds()
	if items <= 0 || secs <= 0 {
		return
	}
	hz := float64(clockTicks)
	r.WindowItems, r.WindowS = items, secs
	r.ItemsPerS = float64(items) / secs
	r.WallMSPerItem = 1000 / r.ItemsPerS
	r.CPUMSPerItem = float64(b.cpuTicks-a.cpuTicks) / hz * 1000 / float64(items)
	r.TreeCPUMSPerItem = float64(b.cpuTicks+b.childTicks-a.cpuTicks-a.childTicks) / hz * 1000 / float64(items)
	r.RunnerCPUS = float64(samples[len(samples)-1].cpuTicks) / hz
}

// clockTicks is USER_HZ, the unit of /proc/PID/stat's times (100 on
// every Linux architecture Go supports).
const clockTicks = 100

// cpuTicks is utime+stime of pid itself (fields 14 and 15 of
// /proc/PID/stat) and cutime+cstime, its reaped children's (16 and 17);
// -1 when they cannot be read.
func cpuTicks(pid int) (self, children int64) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return -1, -1
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return -1, -1
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 15 {
		return -1, -1
	}
	var v [4]int64
	for k := range v {
		n, err := strconv.ParseInt(f[11+k], 10, 64)
		if err != nil {
			return -1, -1
		}
		v[k] = n
	}
	return v[0] + v[1], v[2] + v[3]
}

// CommitRatio is one N's per-item figures over the N=1,000 runs' mean
// (-commits).
type CommitRatio struct {
	N         int     `json:"n"`
	RunnerCPU float64 `json:"runner_cpu"`
	TreeCPU   float64 `json:"tree_cpu"`
	Merge     float64 `json:"merge"`
	PeakRSS   float64 `json:"peak_rss"`
}

// commitRatios compares every run of another N with the mean of the
// N=1,000 runs (none without one).
func commitRatios(runs []Run) []CommitRatio {
	var base Run
	k := 0.0
	for _, r := range runs {
		if r.N == 1000 {
			base.CPUMSPerItem += r.CPUMSPerItem
			base.TreeCPUMSPerItem += r.TreeCPUMSPerItem
			base.MergeMSPerItem += r.MergeMSPerItem
			base.PeakRSSMiB += r.PeakRSSMiB
			k++
		}
	}
	if k == 0 || base.CPUMSPerItem <= 0 || base.TreeCPUMSPerItem <= 0 {
		return nil
	}
	base.CPUMSPerItem, base.TreeCPUMSPerItem, base.MergeMSPerItem, base.PeakRSSMiB = base.CPUMSPerItem/k, base.TreeCPUMSPerItem/k, base.MergeMSPerItem/k, base.PeakRSSMiB/k
	var out []CommitRatio
	for _, r := range runs {
		if r.N == 1000 {
			continue
		}
		cr := CommitRatio{N: r.N, RunnerCPU: r.CPUMSPerItem / base.CPUMSPerItem, TreeCPU: r.TreeCPUMSPerItem / base.TreeCPUMSPerItem, PeakRSS: r.PeakRSSMiB / base.PeakRSSMiB}
		if base.MergeMSPerItem > 0 {
			cr.Merge = r.MergeMSPerItem / base.MergeMSPerItem
		}
		out = append(out, cr)
	}
	return out
}

// vmHWM is the peak resident set of pid in KiB, -1 when unknown.
func vmHWM(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				v, err := strconv.ParseInt(f[0], 10, 64)
				if err == nil {
					return v
				}
			}
		}
	}
	return -1
}

// eventTail reads events.jsonl incrementally.
type eventTail struct {
	path       string
	off        int64
	partial    []byte
	finished   int
	firstStart time.Time
}

func (e *eventTail) poll() {
	f, err := os.Open(e.path)
	if err != nil {
		return
	}
	defer f.Close()
	if _, err := f.Seek(e.off, io.SeekStart); err != nil {
		return
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return
	}
	e.off += int64(len(b))
	b = append(e.partial, b...)
	last := bytes.LastIndexByte(b, '\n')
	if last < 0 {
		e.partial = b
		return
	}
	e.partial = append([]byte(nil), b[last+1:]...)
	for _, line := range bytes.Split(b[:last], []byte("\n")) {
		switch {
		case bytes.Contains(line, []byte(`"event_type":"agent_completed"`)):
			e.finished++
		case e.firstStart.IsZero() && bytes.Contains(line, []byte(`"event_type":"agent_started"`)):
			var rec struct {
				Timestamp time.Time `json:"timestamp"`
			}
			if json.Unmarshal(line, &rec) == nil {
				e.firstStart = rec.Timestamp
			}
		}
	}
}

type tail struct{ b []byte }

func (t *tail) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > 16<<10 {
		t.b = t.b[len(t.b)-8<<10:]
	}
	return len(p), nil
}
func (t *tail) String() string { return string(t.b) }

// firstByte is a buffer that notes when its first byte came. (It does
// not embed bytes.Buffer: io.Copy would use the promoted ReadFrom and
// never call Write.)
type firstByte struct {
	buf   bytes.Buffer
	start time.Time
	first float64
}

func (f *firstByte) Write(p []byte) (int, error) {
	if f.buf.Len() == 0 && len(p) > 0 {
		f.first = time.Since(f.start).Seconds()
	}
	return f.buf.Write(p)
}

func (f *firstByte) Len() int       { return f.buf.Len() }
func (f *firstByte) Bytes() []byte  { return f.buf.Bytes() }
func (f *firstByte) String() string { return f.buf.String() }

// timeStatus runs BIN ARGS in dir and returns its wall time and peak RSS.
func timeStatus(bin string, args []string, dir string, env []string, out *firstByte) (float64, float64, error) {
	st := exec.Command(bin, args...)
	st.Dir = dir
	st.Env = env
	st.Stdout = out
	out.start = time.Now()
	err := st.Run()
	d := time.Since(out.start).Seconds()
	if err != nil && st.ProcessState.ExitCode() < 0 {
		return 0, 0, fmt.Errorf("%s: %w", strings.Join(args, " "), err)
	}
	rss := 0.0
	if ru, ok := st.ProcessState.SysUsage().(*syscall.Rusage); ok {
		rss = float64(ru.Maxrss) / 1024
	}
	return d, rss, nil
}

// jsonEqual compares two JSON documents by value.
func jsonEqual(a, b []byte) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && reflect.DeepEqual(x, y)
}

func printText(w io.Writer, r *Report) {
	kind := "no-op items"
	if r.CommitSlots > 0 {
		kind = fmt.Sprintf("items that commit (out/item-<i mod %d>.txt)", r.CommitSlots)
	}
	fmt.Fprintf(w, "engine at scale: %s, %d CPUs, loadavg %s\n\n", kind, r.CPUs, r.Load)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "N\tP\twindow\tfirst item s\titems/s\twall ms/item\tCPU ms/item\tpeak RSS MiB\tstatus s\tstatus --json s\tmerged\tpending\tcheck\t")
	for _, x := range r.Runs {
		win := "full"
		if x.Windowed {
			win = fmt.Sprintf("%d in %.0fs", x.Finished, x.WallS)
		}
		ok := "ok"
		if !x.CheckOK {
			ok = "FAIL"
		}
		fmt.Fprintf(tw, "%d\t%d\t%s\t%.2f\t%.1f\t%.1f\t%.3f\t%.1f\t%.2f\t%.2f\t%d\t%d\t%s\t\n", x.N, x.MaxParallel, win,
			x.FirstItemS, x.ItemsPerS, x.WallMSPerItem, x.CPUMSPerItem, x.PeakRSSMiB, x.StatusS, x.StatusJSONS, x.Merged, x.Pending, ok)
	}
	_ = tw.Flush()
	for _, x := range r.Runs {
		fmt.Fprintf(w, "N=%d status --json: first byte %.3f s, all %.2f s, peak RSS %.1f MiB", x.N, x.StatusJSONFirstS, x.StatusJSONS, x.StatusJSONRSSMiB)
		if x.BaselineJSONS > 0 {
			fmt.Fprintf(w, "; baseline: first byte %.3f s, all %.2f s, peak RSS %.1f MiB", x.BaselineJSONFirstS, x.BaselineJSONS, x.BaselineJSONRSSMiB)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "\nbookkeeping (runner CPU/item) 10k/1k: %.2f×  wall/item 10k/1k: %.2f×  throughput 1M/1k: %.2f×\n",
		r.BookkeepingRatio10k, r.WallPerItemRatio10k, r.Throughput1MOver1k)
	for _, x := range r.Runs {
		if r.CommitSlots > 0 {
			fmt.Fprintf(w, "N=%d commits: tree CPU %.2f ms/item, runner %.2f ms/item, merge %.2f ms/item, peak RSS %.1f MiB\n", x.N, x.TreeCPUMSPerItem, x.CPUMSPerItem, x.MergeMSPerItem, x.PeakRSSMiB)
		}
	}
	for _, cr := range r.Commits {
		fmt.Fprintf(w, "N=%d over N=1000: runner CPU %.2f×  tree CPU %.2f×  merge %.2f×  peak RSS %.2f×\n", cr.N, cr.RunnerCPU, cr.TreeCPU, cr.Merge, cr.PeakRSS)
	}
	for _, x := range r.Runs {
		if !x.CheckOK {
			fmt.Fprintf(w, "N=%d check failed: %s\n", x.N, x.CheckError)
		}
	}
}
