package actionapp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prodigy-action/prodigy-action/config"
	"github.com/prodigy-action/prodigy-action/ghaction"
	"github.com/prodigy-action/prodigy-action/gitops"
	"github.com/prodigy-action/prodigy-action/runner"
	"github.com/prodigy-action/prodigy-action/shard"
	"github.com/prodigy-action/prodigy-action/validate"
)

// Defaults of the sharded fan-out inputs, relative to the workspace (a
// container action sees the workspace at the same path as later steps).
const (
	defaultPlanDir  = ".prodigy-fanout/plan"
	defaultShardOut = ".prodigy-fanout/shard"
)

// inWorkspace resolves a path input against the workspace.
func (r *actionRun) inWorkspace(p, def string) string {
	if p == "" {
		p = def
	}
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(r.ws, p)
}

// engine is the engine of every command the Action runs (run, retry,
// plan, shard, gather); each builds its own (DeferTeardown differs).
func (r *actionRun) engine() *runner.Engine {
	e := r.env
	return &runner.Engine{
		Home: r.home,
		// The engine's stderr carries step output and error text: no line
		// of it may act as a workflow command.
		Stderr: ghaction.NeutralizeWriter(e.Stderr),
		Getenv: e.Getenv, ClaudeCommand: r.in.ClaudeCommand, ClaudeArgs: r.in.ClaudeArgs, Clock: e.Clock,
		Hooks: &actionHooks{gha: e.gha, out: e.Stdout, redact: r.redact}, Redactor: r.redact,
		Tracer: r.tracing.Tracer(),
		// GitHub's cancel sequence: the agents stop at the first signal.
		InterruptGrace: stopAgentsNow, KillGrace: e.Cancel.KillGrace,
		// The engine's git and the agents' git both get safe.directory:
		// the workspace belongs to the runner's user, not to this container's.
		Environ: gitops.ConfigEnv(scrubEnv(e.Environ()), r.gitConfig), Git: r.gitOptions(),
	}
}

// agents is how the Action's agents run (inputs max-parallel, agent-user
// and the Claude settings).
func (r *actionRun) agents() runner.Agents {
	return runner.Agents{MaxParallel: r.in.MaxParallel, User: agentUser(r.in.AgentUser), Claude: r.claudeSettings()}
}

// shardCommand runs `command: plan` or `command: shard`, which publish no
// job report (gather does, through runJob); ok is false for any other
// command.
func (r *actionRun) shardCommand(ctx context.Context) (code int, ok bool) {
	switch r.in.Command {
	case "plan":
		return r.plan(ctx), true
	case "shard":
		return r.shard(ctx), true
	}
	return 0, false
}

// plan runs `action plan` and sets the outputs job-id, shards, total,
// matrix ({"shard":[0,…]}, for fromJSON) and plan-dir. With
// retry-from-run it re-plans that run's DLQ only.
func (r *actionRun) plan(ctx context.Context) int {
	e := r.env
	fail := func(err error) int {
		e.gha.Errorf("plan: %s", r.redact.String(oneLine(err)))
		return runner.ExitCode(err)
	}
	shards := 0
	if s := e.gha.GetInput("shards"); s != "" && s != "auto" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > shard.MaxShards {
			e.gha.Errorf("input shards: want 1-%d or auto, got %q", shard.MaxShards, s)
			return exitUsage
		}
		shards = n
	}
	eng := r.engine()
	var fromDLQ string
	if r.in.RetryFromRun > 0 {
		jobID, err := r.importRunDLQ(ctx, e.Engine(eng))
		if err != nil {
			return fail(err)
		}
		fromDLQ = jobID
	}
	if r.in.Workflow == "" {
		e.gha.Errorf("input workflow is required for command plan")
		return exitUsage
	}
	wfPath := r.in.Workflow
	if !filepath.IsAbs(wfPath) {
		wfPath = filepath.Join(r.ws, wfPath)
	}
	v := validate.File(wfPath, validate.Options{})
	if err := v.Err(); err != nil {
		return fail(err)
	}
	dir := r.inWorkspace(e.gha.GetInput("plan-dir"), defaultPlanDir)
	p, err := shard.NewPlan(ctx, eng, shard.PlanSpec{Workflow: v.Workflow, RepoDir: r.ws, MaxParallel: r.in.MaxParallel, Dir: dir, Shards: shards, FromDLQ: fromDLQ})
	if err != nil {
		return fail(err)
	}
	matrix := struct {
		Shard []int `json:"shard"`
	}{Shard: make([]int, len(p.Shards))}
	for k := range matrix.Shard {
		matrix.Shard[k] = k
	}
	m, _ := json.Marshal(matrix)
	if e.Getenv("GITHUB_OUTPUT") != "" {
		for _, kv := range [][2]string{{"job-id", p.JobID}, {"shards", strconv.Itoa(len(p.Shards))}, {"total", strconv.Itoa(len(p.Items))}, {"matrix", string(m)}, {"plan-dir", dir}} {
			e.gha.SetOutput(kv[0], kv[1])
		}
	}
	e.gha.Noticef("planned job %s: %d item(s) in %d shard(s)", p.JobID, len(p.Items), len(p.Shards))
	return exitOK
}

// shard runs `action shard` for input shard and sets the outputs job-id,
// successful, failed, dlq-count and shard-out. The output directory is
// written even when the shard fails, for an `if: always()` upload.
func (r *actionRun) shard(ctx context.Context) int {
	e := r.env
	k, err := strconv.Atoi(e.gha.GetInput("shard"))
	if err != nil || k < 0 {
		e.gha.Errorf("input shard: want a shard index (0, 1, …), got %q", e.gha.GetInput("shard"))
		return exitUsage
	}
	out := r.inWorkspace(e.gha.GetInput("shard-out"), defaultShardOut)
	var cont string
	if in := e.gha.GetInput("shard-continue"); in != "" {
		cont = previousShardOutput(r.inWorkspace(in, ""), k)
	}
	so := shard.RunSpec{RepoDir: r.ws, Agents: r.agents(), PlanDir: r.inWorkspace(e.gha.GetInput("plan-dir"), defaultPlanDir), Shard: k, OutDir: out, Continue: cont, Attempt: int(r.ctx.RunAttempt)}
	live, code := r.liveUploads(out, k)
	if code != exitOK {
		return code
	}
	if live != nil {
		so.OutputLock, so.Written = live.lock, live.written
		live.start(ctx)
	}
	sr, err := shard.Run(ctx, r.engine(), so)
	if live != nil {
		live.finish(ctx) // after a signal: nothing more (the step's upload follows)
	}
	if err != nil {
		e.gha.Errorf("shard %d: %s", k, r.redact.String(oneLine(err)))
	}
	if sr != nil && e.Getenv("GITHUB_OUTPUT") != "" {
		for _, kv := range [][2]string{{"job-id", sr.JobID}, {"successful", strconv.Itoa(sr.Successful)}, {"failed", strconv.Itoa(sr.Failed)}, {"dlq-count", strconv.Itoa(sr.DLQCount)}, {"shard-out", out}} {
			e.gha.SetOutput(kv[0], kv[1])
		}
	}
	if err != nil {
		return runner.ExitCode(err)
	}
	return exitOK
}

// liveUploads is the shard's live upload of its output (live-artifact,
// live-upload-interval), or nil when live-artifact is empty or the
// artifact service is unavailable (with a warning: the step's upload
// still runs).
func (r *actionRun) liveUploads(out string, k int) (*liveUploads, int) {
	e := r.env
	prefix := e.gha.GetInput("live-artifact")
	if prefix == "" {
		return nil, exitOK
	}
	if err := ghaction.ValidateArtifactName(prefix); err != nil {
		e.gha.Errorf("input live-artifact: %s", oneLine(err))
		return nil, exitUsage
	}
	interval := time.Minute
	if s := e.gha.GetInput("live-upload-interval"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d < time.Second {
			e.gha.Errorf("input live-upload-interval: want a duration of at least 1s (e.g. 60s, 5m), got %q", s)
			return nil, exitUsage
		}
		interval = d
	}
	client, err := r.artifactClient()
	if err != nil {
		e.gha.Warningf("shard output not uploaded while the shard runs: %s", oneLine(err))
		return nil, exitOK
	}
	return &liveUploads{
		client: client, dir: out, tmpDir: r.home, prefix: prefix, shard: k, interval: interval, days: r.retentionDays(),
		now: e.now, sleep: e.sleep, lock: new(sync.Mutex),
		log: func(s string) { fmt.Fprintf(e.Stderr, "prodigy: %s\n", r.redact.String(s)) },
	}, exitOK
}

// gather runs `action gather` over the shard outputs found under the
// shard-outputs input (one directory per line; a directory without
// result.json stands for its subdirectories that have one, as
// actions/download-artifact lays them out). Its result is reported like
// a run's: DLQ artifact, summary, comment, push.
func (r *actionRun) gather(ctx context.Context, eng *runner.Engine) (*runner.Result, error) {
	e := r.env
	var outs []string
	for _, line := range strings.Split(e.gha.GetInput("shard-outputs"), "\n") {
		if line = strings.TrimSpace(line); line == "" {
			continue
		}
		dir := r.inWorkspace(line, "")
		if _, err := os.Stat(filepath.Join(dir, shard.ResultFile)); err == nil {
			outs = append(outs, dir)
			continue
		}
		entries, err := os.ReadDir(dir)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("input shard-outputs: %w", err)
		}
		for _, en := range entries {
			sub := filepath.Join(dir, en.Name())
			if _, err := os.Stat(filepath.Join(sub, shard.ResultFile)); en.IsDir() && err == nil {
				outs = append(outs, sub)
			}
		}
	}
	reject, err := r.reviewRejections(ctx)
	if err != nil {
		return nil, err
	}
	return shard.Gather(ctx, eng, shard.GatherSpec{RepoDir: r.ws, PlanDir: r.inWorkspace(e.gha.GetInput("plan-dir"), defaultPlanDir), Outputs: newestAttempts(outs), Reject: reject})
}

// previousShardOutput is the shard-continue input resolved for shard k:
// dir itself when it holds a result.json, else the newest attempt of shard
// k among its subdirectories (as actions/download-artifact lays out the
// earlier attempts' artifacts); "" when there is none (a first attempt).
func previousShardOutput(dir string, k int) string {
	if _, err := os.Stat(filepath.Join(dir, shard.ResultFile)); err == nil {
		return dir
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return ""
	}
	var subs []string
	for _, en := range entries {
		if en.IsDir() {
			subs = append(subs, filepath.Join(dir, en.Name()))
		}
	}
	for _, d := range newestAttempts(subs) {
		var sr struct {
			Shard *int `json:"shard"`
		}
		data, err := os.ReadFile(filepath.Join(d, shard.ResultFile))
		if err == nil && json.Unmarshal(data, &sr) == nil && sr.Shard != nil && *sr.Shard == k {
			return d
		}
	}
	return ""
}

// newestAttempts keeps one output per shard: a re-run of failed jobs adds
// its attempt's outputs next to the earlier attempts', and a shard's live
// uploads add snapshots of one attempt beside its final output. The
// newest wins: the highest run_attempt of result.json (for outputs written
// without one, the <attempt> of a prodigy-shard-<run>-<attempt>-<shard>
// directory name), then the highest output_seq (the final write of an
// attempt has the highest). Outputs whose result.json cannot be read are
// kept (gather reports them).
func newestAttempts(dirs []string) []string {
	type pick struct {
		dir          string
		attempt, seq int
	}
	best := map[int]pick{}
	var out []string
	for _, d := range dirs {
		var sr struct {
			Shard      *int `json:"shard"`
			RunAttempt int  `json:"run_attempt"`
			OutputSeq  int  `json:"output_seq"`
		}
		data, err := os.ReadFile(filepath.Join(d, shard.ResultFile))
		if err != nil || json.Unmarshal(data, &sr) != nil || sr.Shard == nil {
			out = append(out, d)
			continue
		}
		attempt := sr.RunAttempt
		if f := strings.Split(filepath.Base(d), "-"); attempt == 0 && len(f) >= 2 {
			attempt, _ = strconv.Atoi(f[len(f)-2])
		}
		cur, ok := best[*sr.Shard]
		if !ok || attempt > cur.attempt || (attempt == cur.attempt && sr.OutputSeq >= cur.seq) {
			best[*sr.Shard] = pick{d, attempt, sr.OutputSeq}
		}
	}
	for _, p := range best {
		out = append(out, p.dir)
	}
	return out
}

// claudeSettings are the claude-* inputs as overrides of the workflow's
// Claude options.
func (r *actionRun) claudeSettings() config.ClaudeSettings {
	return config.ClaudeSettings{
		Model: r.in.ClaudeModel, PermissionMode: r.in.ClaudePermissionMode,
		AllowedTools: r.in.ClaudeAllowedTools, DisallowedTools: r.in.ClaudeDisallowedTools, MaxTurns: r.in.ClaudeMaxTurns,
	}
}

// agentUser maps the agent-user input to runner.Agents.User: "off"
// runs agents as the engine.
func agentUser(in string) string {
	if strings.EqualFold(in, "off") {
		return ""
	}
	return in
}
