// Command dlq benchmarks the dead letter queue at scale (issue 4): it fills
// a temporary PRODIGY_HOME with -n records, then times the real CLI
// (`action dlq stats`, `list --limit 20`, `analyze`, `export --format csv`)
// as child processes, reporting wall time and peak RSS (getrusage maxrss),
// and the cost of one Store.Add at that size (mean/p50/p99). With -retry
// (default) the records belong to a real job (one merged item, made by
// `action run`) and `dlq list`, `list --limit 0`, `dlq retry --dry-run` and
// `retry --dry-run --json` (issue 11: streamed selection) are measured too.
//
//	go run ./bench/dlq [-n 100000] [-adds 1000] [-json] [-retry=false] [-only REGEXP]
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/prodigy-action/prodigy-action/dlq"
)

const (
	repo  = "bench"
	jobID = "mapreduce-bench"
)

// Result is one measured operation.
type Result struct {
	Name       string  `json:"name"`
	Items      int     `json:"items"`
	WallMS     float64 `json:"wall_ms"`
	MaxRSSMiB  float64 `json:"max_rss_mib,omitempty"`
	OutputSize int64   `json:"output_bytes,omitempty"`
}

// AddCost summarises Store.Add latencies.
type AddCost struct {
	Adds       int     `json:"adds"`
	StoreSize  int     `json:"store_size"`
	MeanUS     float64 `json:"mean_us"`
	P50US      float64 `json:"p50_us"`
	P99US      float64 `json:"p99_us"`
	MaxUS      float64 `json:"max_us"`
	FirstLoadM float64 `json:"first_load_ms"`
}

// Report is the -json output.
type Report struct {
	Records  int       `json:"records"`
	Redrives []Redrive `json:"redrives,omitempty"`
	BuildSec float64   `json:"build_seconds"`
	Commands []Result  `json:"commands"`
	Add      AddCost   `json:"add"`
	GoOS     string    `json:"goos"`
	CPUs     int       `json:"cpus"`
}

func main() {
	if os.Getenv(launchEnv) == "1" {
		os.Exit(launch(os.Args[1:]))
	}
	if d := os.Getenv(artifactEnv); d != "" {
		os.Exit(artifactChild(d))
	}
	n := flag.Int("n", 100000, "records in the queue")
	adds := flag.Int("adds", 1000, "Store.Add calls to time")
	asJSON := flag.Bool("json", false, "print one JSON object")
	bin := flag.String("bin", "", "action binary (default: go build ./cmd/action)")
	keep := flag.Bool("keep", false, "keep the temporary PRODIGY_HOME")
	only := flag.String("only", "", "measure only the commands whose name matches this regular expression (e.g. '^(list|retry)')")
	flag.BoolVar(&measureArtifact, "artifact", true, "also measure the Action's DLQ artifact (zip built to a file and uploaded to a local artifact service) against a `cat` of every record")
	retry := flag.Bool("retry", true, "also measure `dlq retry --dry-run` (and --json) against `dlq list` of all records, on a real job")
	flag.DurationVar(&redriveWindow, "redrive", 0, "with -retry: also run a real `dlq retry --force` for this long, then SIGINT it, and report its peak RSS (0: skip)")
	flag.StringVar(&beforeBin, "before-bin", "", "with -redrive: a second CLI (e.g. an older build) whose real redrive is measured too, first; it also creates the job")
	flag.Parse()
	if err := run(*n, *adds, *asJSON, *retry, *only, *bin, *keep, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func run(n, adds int, asJSON, retry bool, only, bin string, keep bool, stdout, stderr io.Writer) error {
	home, err := os.MkdirTemp("", "dlq-bench-")
	if err != nil {
		return err
	}
	if keep {
		fmt.Fprintln(stderr, "PRODIGY_HOME:", home)
	} else {
		defer os.RemoveAll(home)
	}
	if bin == "" {
		bin = filepath.Join(home, "action")
		build := exec.Command("go", "build", "-o", bin, "github.com/prodigy-action/prodigy-action/cmd/action")
		build.Stderr = stderr
		if err := build.Run(); err != nil {
			return fmt.Errorf("build the action binary: %w", err)
		}
	}
	rep := Report{Records: n, GoOS: runtime.GOOS, CPUs: runtime.NumCPU()}
	if retry {
		fmt.Fprintf(stderr, "creating job %s (one item, merged) …\n", jobID)
		maker := bin
		if beforeBin != "" {
			maker = beforeBin // an older build may not read a newer checkpoint
		}
		if err := makeJob(maker, home); err != nil {
			return err
		}
	}
	fmt.Fprintf(stderr, "building %d records in %s …\n", n, home)
	start := time.Now()
	if err := fill(home, n); err != nil {
		return err
	}
	rep.BuildSec = time.Since(start).Seconds()

	if rep.Add, err = timeAdds(home, n, adds); err != nil {
		return err
	}
	out := filepath.Join(home, "export.csv")
	type command struct {
		name string
		args []string
	}
	cmds := []command{
		{"stats --json", []string{"dlq", "stats", "--json"}},
		{"list --limit 20", []string{"dlq", "list", "--limit", "20"}},
		{"analyze", []string{"dlq", "analyze"}},
		{"export --format csv", []string{"dlq", "export", out, "--format", "csv"}},
	}
	if retry {
		cmds = append(cmds,
			command{"list", []string{"dlq", "list", "--job-id", jobID}},
			command{"list --limit 0", []string{"dlq", "list", "--job-id", jobID, "--limit", "0"}},
			command{"retry --dry-run", []string{"dlq", "retry", jobID, "--dry-run", "--force"}},
			command{"retry --dry-run --json", []string{"dlq", "retry", jobID, "--dry-run", "--force", "--json"}})
	}
	pick, err := regexp.Compile(only)
	if err != nil {
		return fmt.Errorf("-only: %w", err)
	}
	for _, c := range cmds {
		if !pick.MatchString(c.name) {
			continue
		}
		r, err := timeCommand(bin, home, c.args)
		if err != nil {
			return fmt.Errorf("%s: %w", c.name, err)
		}
		r.Name, r.Items = c.name, n+adds
		if c.name == "export --format csv" {
			if fi, err := os.Stat(out); err == nil {
				r.OutputSize = fi.Size()
			}
		}
		rep.Commands = append(rep.Commands, r)
	}
	if measureArtifact && pick.MatchString("artifact") {
		fmt.Fprintf(stderr, "DLQ artifact of %d records …\n", n+adds)
		art, cat, err := timeArtifact(home)
		if err != nil {
			return fmt.Errorf("artifact: %w", err)
		}
		cat.Name, cat.Items = "cat of the records", n+adds
		art.Name, art.Items = "artifact build+upload", n+adds
		rep.Commands = append(rep.Commands, cat, art)
	}
	if retry && redriveWindow > 0 {
		bins := []string{bin}
		if beforeBin != "" {
			bins = []string{beforeBin, bin}
		}
		for _, b := range bins {
			fmt.Fprintf(stderr, "real redrive with %s for %s …\n", b, redriveWindow)
			rd, err := timeRedrive(b, home, redriveWindow)
			if err != nil {
				return err
			}
			rep.Redrives = append(rep.Redrives, rd)
		}
	}
	if asJSON {
		return json.NewEncoder(stdout).Encode(rep)
	}
	return printReport(stdout, rep)
}

var (
	redriveWindow   time.Duration
	beforeBin       string
	measureArtifact bool
)

// Redrive is a bounded window of a real `dlq retry --force`.
type Redrive struct {
	Binary      string  `json:"binary"`
	WindowS     float64 `json:"window_s"`
	WallS       float64 `json:"wall_s"`
	PeakRSSMiB  float64 `json:"peak_rss_mib"`
	FirstAgentS float64 `json:"first_agent_s"`
	AgentsInWin int     `json:"agents_started"`
	ExitedEarly bool    `json:"exited_before_window"`
}

// timeRedrive runs a real redrive of every record for window (from its
// start), then SIGINTs it and waits; its peak RSS is VmHWM polled from
// /proc (reset by exec, so it is the CLI's own).
func timeRedrive(bin, home string, window time.Duration) (Redrive, error) {
	events := filepath.Join(home, "events", repo, jobID, "events.jsonl")
	before := countStarted(events)
	cmd := exec.Command(bin, "dlq", "retry", jobID, "--force")
	cmd.Env = append(os.Environ(), "PRODIGY_HOME="+home, "GITHUB_ACTIONS=")
	cmd.Stdout = io.Discard
	var errb limitedBuffer
	cmd.Stderr = &errb
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return Redrive{}, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	r := Redrive{Binary: bin, WindowS: window.Seconds()}
	var hwm int64
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(window)
	signalled := false
	for {
		select {
		case <-done:
			r.WallS = time.Since(start).Seconds()
			r.PeakRSSMiB = float64(hwm) / 1024
			r.ExitedEarly = !signalled
			r.AgentsInWin = countStarted(events) - before
			if first := firstStarted(events, before); !first.IsZero() {
				r.FirstAgentS = first.Sub(start).Seconds()
			}
			return r, nil
		case <-deadline:
			signalled = true
			_ = cmd.Process.Signal(syscall.SIGINT)
		case <-tick.C:
			hwm = max(hwm, procHWM(cmd.Process.Pid))
		}
	}
}

func procHWM(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			var kib int64
			fmt.Sscan(rest, &kib)
			return kib
		}
	}
	return 0
}

// countStarted counts agent_started events; firstStarted is the
// timestamp of the one after the first skip of them.
func countStarted(path string) int {
	b, _ := os.ReadFile(path)
	return strings.Count(string(b), `"event_type":"agent_started"`)
}

func firstStarted(path string, skip int) time.Time {
	b, _ := os.ReadFile(path)
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.Contains(line, `"event_type":"agent_started"`) {
			continue
		}
		if skip > 0 {
			skip--
			continue
		}
		var rec struct {
			Timestamp time.Time `json:"timestamp"`
		}
		_ = json.Unmarshal([]byte(line), &rec)
		return rec.Timestamp
	}
	return time.Time{}
}

// fill writes n records straight into items/ (8 writers, no fsync), then
// lets the store rebuild index.json from items/ as it does after a crash.
func fill(home string, n int) error {
	s, err := dlq.Open(filepath.Join(home, "dlq", repo, jobID), jobID, dlq.Options{Capacity: -1})
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(s.ItemPath("x")), 0o755); err != nil {
		return err
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += 8 {
				b, err := dlq.Encode(record(i))
				if err == nil {
					err = os.WriteFile(s.ItemPath(itemID(i)), b, 0o644)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	if _, err := s.Index(); err != nil {
		return err
	}
	return s.Close()
}

// makeJob creates job jobID with the real CLI: a git repository named
// repo (so the job's DLQ is the directory fill writes) and a one-item
// workflow whose item merges, so the job has no DLQ record of its own.
func makeJob(bin, home string) error {
	dir := filepath.Join(home, "src", repo)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "items.json"), []byte(`[{"path":"seed"}]`), 0o644); err != nil {
		return err
	}
	wf := filepath.Join(home, "workflow.yml")
	body := "name: dlq-bench\nmap:\n  input: items.json\n  id_field: path\n  agent_template:\n" +
		"    - shell: 'echo \"${item.path}\" > out.txt && git add out.txt && git commit -qm \"${item_id}\"'\n"
	if err := os.WriteFile(wf, []byte(body), 0o644); err != nil {
		return err
	}
	for _, args := range [][]string{
		{"git", "init", "-q", "-b", "main"},
		{"git", "-c", "user.name=bench", "-c", "user.email=bench@example.com", "add", "."},
		{"git", "-c", "user.name=bench", "-c", "user.email=bench@example.com", "commit", "-qm", "init"},
		{bin, "run", wf, "--repo", dir, "--job-id", jobID},
	} {
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "PRODIGY_HOME="+home, "GITHUB_ACTIONS=",
			"GIT_AUTHOR_NAME=bench", "GIT_AUTHOR_EMAIL=bench@example.com", "GIT_COMMITTER_NAME=bench", "GIT_COMMITTER_EMAIL=bench@example.com")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%v: %w\n%s", args, err, out)
		}
	}
	return nil
}

func itemID(i int) string { return fmt.Sprintf("item-%07d", i) }

var messages = []struct {
	t   *dlq.ErrorType
	msg string
}{
	{nil, "cargo test failed with exit code 101"},
	{nil, "Command exceeded %d second timeout"},
	{nil, "Connection failed at /srv/app/file%d.go:123 with error code 42"},
	{nil, "CONFLICT (content): Merge conflict in src/lib%d.rs"},
	{nil, "Commit required but no commit was created"},
	{nil, "git worktree add failed for agent-%d"},
	{nil, "fatal: out of memory allocating %d bytes"},
	{nil, "item validation failed: field priority=%d is invalid"},
	{nil, "claude exited with code 1 after %d turns"},
	{nil, "something unexpected happened in step %d"},
}

func record(i int) dlq.DeadLetteredItem {
	base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(i%(30*24*60)) * time.Minute)
	m := messages[i%len(messages)]
	var fs []dlq.Failure
	for k := range 1 + i%3 {
		fs = append(fs, dlq.Failure{Attempt: k + 1, At: base.Add(time.Duration(k) * time.Minute), Type: m.t,
			Message: fmt.Sprintf(m.msg, i%997), AgentID: fmt.Sprintf("agent-%d", i%16), Step: "shell: make test",
			Duration: time.Duration(i%60000) * time.Millisecond, StackTrace: "stderr tail …",
			LogPath: fmt.Sprintf("/home/u/.prodigy/logs/%s/%s/%s/attempt-%d.jsonl", repo, jobID, itemID(i), k+1)})
	}
	return *dlq.FromAgentResult(dlq.AgentResult{ItemID: itemID(i), Status: dlq.StatusFailed, Failures: fs,
		ItemData:     json.RawMessage(fmt.Sprintf(`{"path":"src/file%d.go","priority":%d,"owner":"team-%d"}`, i, i%10, i%7)),
		WorktreePath: fmt.Sprintf("/home/u/.prodigy/worktrees/%s/%s/agent-%d", repo, jobID, i%16), BranchName: "prodigy-agent-" + itemID(i)})
}

// timeAdds opens the full store (timing its first load, which reconciles
// index.json with items/) and times adds of new ids.
func timeAdds(home string, n, adds int) (AddCost, error) {
	s, err := dlq.Open(filepath.Join(home, "dlq", repo, jobID), jobID, dlq.Options{Capacity: -1})
	if err != nil {
		return AddCost{}, err
	}
	start := time.Now()
	if _, err := s.Count(); err != nil {
		return AddCost{}, err
	}
	c := AddCost{Adds: adds, StoreSize: n, FirstLoadM: ms(time.Since(start))}
	lat := make([]time.Duration, adds)
	var total time.Duration
	for i := range adds {
		d := record(n + i)
		t0 := time.Now()
		if _, err := s.Add(d); err != nil {
			return AddCost{}, err
		}
		lat[i] = time.Since(t0)
		total += lat[i]
	}
	if err := s.Close(); err != nil {
		return AddCost{}, err
	}
	if adds == 0 {
		return c, nil
	}
	slices.Sort(lat)
	c.MeanUS = us(total / time.Duration(adds))
	c.P50US = us(lat[adds/2])
	c.P99US = us(lat[min(adds-1, adds*99/100)])
	c.MaxUS = us(lat[adds-1])
	return c, nil
}

// launchEnv makes this binary a launcher: it runs its arguments as a
// child and prints that child's wall time and peak RSS. Linux charges a
// process the peak RSS of the memory image it exec'd from (exec records
// the old mm's high-water mark), so measuring the CLI directly from this
// process would report our own 100k-record peak; a freshly exec'd
// launcher is small and reports the CLI's own peak.
const launchEnv = "DLQ_BENCH_LAUNCH"

type launchResult struct {
	WallMS    float64 `json:"wall_ms"`
	MaxRSSKiB int64   `json:"max_rss_kib"`
	Error     string  `json:"error,omitempty"`
}

func launch(args []string) int {
	cmd := exec.Command(args[0], args[1:]...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, launchEnv+"=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Stdout = io.Discard
	var errb limitedBuffer
	cmd.Stderr = &errb
	start := time.Now()
	err := cmd.Run()
	r := launchResult{WallMS: ms(time.Since(start))}
	if err != nil {
		r.Error = fmt.Sprintf("%v: %s", err, errb.String())
	}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		r.MaxRSSKiB = ru.Maxrss // KiB on Linux
	}
	_ = json.NewEncoder(os.Stdout).Encode(r)
	return 0
}

// timeCommand runs the CLI through a launcher (see launchEnv).
func timeCommand(bin, home string, args []string) (Result, error) {
	return launchTimed(append([]string{bin}, args...), []string{"PRODIGY_HOME=" + home, "GITHUB_ACTIONS="})
}

// launchTimed runs args through a launcher (see launchEnv) with env added.
func launchTimed(args, env []string) (Result, error) {
	self, err := os.Executable()
	if err != nil {
		return Result{}, err
	}
	cmd := exec.Command(self, args...)
	cmd.Env = append(append(os.Environ(), launchEnv+"=1"), env...)
	out, err := cmd.Output()
	if err != nil {
		return Result{}, fmt.Errorf("launcher: %w", err)
	}
	var lr launchResult
	if err := json.Unmarshal(out, &lr); err != nil {
		return Result{}, fmt.Errorf("launcher output %q: %w", out, err)
	}
	if lr.Error != "" {
		return Result{}, fmt.Errorf("%s", lr.Error)
	}
	return Result{WallMS: lr.WallMS, MaxRSSMiB: float64(lr.MaxRSSKiB) / 1024}, nil
}

type limitedBuffer struct{ b []byte }

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if len(l.b) < 4096 {
		l.b = append(l.b, p[:min(len(p), 4096-len(l.b))]...)
	}
	return len(p), nil
}
func (l *limitedBuffer) String() string { return string(l.b) }

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
func us(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1000 }

func printReport(w io.Writer, r Report) error {
	fmt.Fprintf(w, "DLQ benchmark: %d records (built in %.1fs), %s, %d CPUs\n\n", r.Records, r.BuildSec, r.GoOS, r.CPUs)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "command\twall ms\tpeak RSS MiB\toutput bytes\t")
	for _, c := range r.Commands {
		fmt.Fprintf(tw, "%s\t%.1f\t%.1f\t%d\t\n", c.Name, c.WallMS, c.MaxRSSMiB, c.OutputSize)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	a := r.Add
	fmt.Fprintf(w, "\nStore.Add of a new id at %d records (%d adds, item file fsynced): mean %.0f µs, p50 %.0f µs, p99 %.0f µs, max %.0f µs\n",
		a.StoreSize, a.Adds, a.MeanUS, a.P50US, a.P99US, a.MaxUS)
	fmt.Fprintf(w, "first load of the store (index.json checked against items/): %.1f ms\n", a.FirstLoadM)
	for _, rd := range r.Redrives {
		fmt.Fprintf(w, "real redrive (%s, SIGINT after %.0f s): peak RSS %.1f MiB, first agent after %.1f s, %d agent(s) started, wall %.1f s\n",
			rd.Binary, rd.WindowS, rd.PeakRSSMiB, rd.FirstAgentS, rd.AgentsInWin, rd.WallS)
	}
	return nil
}
