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

	"github.com/prodigy-action/prodigy-action/config"
	"github.com/prodigy-action/prodigy-action/ghaction"
	"github.com/prodigy-action/prodigy-action/gitops"
	"github.com/prodigy-action/prodigy-action/runner"
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

// engineOptions are the engine options of every command the Action runs
// (run, retry, plan, shard, gather).
func (r *actionRun) engineOptions() runner.Options {
	e := r.env
	return runner.Options{
		Home: r.home, RepoDir: r.ws, MaxParallel: r.in.MaxParallel,
		// The engine's stderr carries step output and error text: no line
		// of it may act as a workflow command.
		Stderr: ghaction.NeutralizeWriter(e.Stderr),
		Getenv: e.Getenv, ClaudeCommand: r.in.ClaudeCommand, ClaudeArgs: r.in.ClaudeArgs, Claude: r.claudeSettings(), Clock: e.Clock,
		Hooks: &actionHooks{gha: e.gha, out: e.Stdout, redact: r.redact}, Redactor: r.redact,
		Tracer: r.tracing.Tracer(), AgentUser: agentUser(r.in.AgentUser),
		// GitHub's cancel sequence: the agents stop at the first signal.
		InterruptGrace: stopAgentsNow, KillGrace: e.Cancel.KillGrace,
		// The engine's git and the agents' git both get safe.directory:
		// the workspace belongs to the runner's user, not to this container's.
		Environ: gitops.ConfigEnv(scrubEnv(e.Environ()), r.gitConfig), Git: r.gitOptions(),
	}
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
		if err != nil || n < 1 || n > runner.MaxShards {
			e.gha.Errorf("input shards: want 1-%d or auto, got %q", runner.MaxShards, s)
			return exitUsage
		}
		shards = n
	}
	opts := r.engineOptions()
	var fromDLQ string
	if r.in.RetryFromRun > 0 {
		jobID, err := r.importRunDLQ(ctx, opts)
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
	v := runner.ValidateFile(wfPath, runner.ValidateOptions{})
	if err := v.Err(); err != nil {
		return fail(err)
	}
	opts.Workflow = v.Workflow
	dir := r.inWorkspace(e.gha.GetInput("plan-dir"), defaultPlanDir)
	p, err := runner.PlanJob(ctx, runner.PlanOptions{Run: opts, Dir: dir, Shards: shards, FromDLQ: fromDLQ})
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
	sr, err := runner.RunShard(ctx, runner.ShardOptions{Run: r.engineOptions(), PlanDir: r.inWorkspace(e.gha.GetInput("plan-dir"), defaultPlanDir), Shard: k, OutDir: out, Continue: cont})
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

// gather runs `action gather` over the shard outputs found under the
// shard-outputs input (one directory per line; a directory without
// result.json stands for its subdirectories that have one, as
// actions/download-artifact lays them out). Its result is reported like
// a run's: DLQ artifact, summary, comment, push.
func (r *actionRun) gather(ctx context.Context, opts runner.Options) (*runner.Result, error) {
	e := r.env
	var outs []string
	for _, line := range strings.Split(e.gha.GetInput("shard-outputs"), "\n") {
		if line = strings.TrimSpace(line); line == "" {
			continue
		}
		dir := r.inWorkspace(line, "")
		if _, err := os.Stat(filepath.Join(dir, runner.ShardResultFile)); err == nil {
			outs = append(outs, dir)
			continue
		}
		entries, err := os.ReadDir(dir)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("input shard-outputs: %w", err)
		}
		for _, en := range entries {
			sub := filepath.Join(dir, en.Name())
			if _, err := os.Stat(filepath.Join(sub, runner.ShardResultFile)); en.IsDir() && err == nil {
				outs = append(outs, sub)
			}
		}
	}
	reject, err := r.reviewRejections(ctx)
	if err != nil {
		return nil, err
	}
	return runner.Gather(ctx, runner.GatherOptions{Run: opts, PlanDir: r.inWorkspace(e.gha.GetInput("plan-dir"), defaultPlanDir), Outputs: newestAttempts(outs), Reject: reject})
}

// previousShardOutput is the shard-continue input resolved for shard k:
// dir itself when it holds a result.json, else the newest attempt of shard
// k among its subdirectories (as actions/download-artifact lays out the
// earlier attempts' artifacts); "" when there is none (a first attempt).
func previousShardOutput(dir string, k int) string {
	if _, err := os.Stat(filepath.Join(dir, runner.ShardResultFile)); err == nil {
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
		data, err := os.ReadFile(filepath.Join(d, runner.ShardResultFile))
		if err == nil && json.Unmarshal(data, &sr) == nil && sr.Shard != nil && *sr.Shard == k {
			return d
		}
	}
	return ""
}

// newestAttempts keeps one output per shard: a re-run of failed jobs adds
// prodigy-shard-<run>-<attempt>-<shard> directories next to the earlier
// attempt's, and the newest attempt of a shard wins. Outputs whose
// result.json cannot be read are kept (gather reports them).
func newestAttempts(dirs []string) []string {
	type pick struct {
		dir     string
		attempt int
	}
	best := map[int]pick{}
	var out []string
	for _, d := range dirs {
		var sr struct {
			Shard *int `json:"shard"`
		}
		data, err := os.ReadFile(filepath.Join(d, runner.ShardResultFile))
		if err != nil || json.Unmarshal(data, &sr) != nil || sr.Shard == nil {
			out = append(out, d)
			continue
		}
		attempt := 0
		if f := strings.Split(filepath.Base(d), "-"); len(f) >= 2 {
			attempt, _ = strconv.Atoi(f[len(f)-2])
		}
		if cur, ok := best[*sr.Shard]; !ok || attempt >= cur.attempt {
			best[*sr.Shard] = pick{d, attempt}
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

// agentUser maps the agent-user input to runner.Options.AgentUser: "off"
// runs agents as the engine.
func agentUser(in string) string {
	if strings.EqualFold(in, "off") {
		return ""
	}
	return in
}
