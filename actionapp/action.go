package actionapp

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/google/go-github/v60/github"
	"github.com/sethvargo/go-githubactions"

	"github.com/prodigy-action/prodigy-action/ghaction"
	"github.com/prodigy-action/prodigy-action/redact"
	"github.com/prodigy-action/prodigy-action/report"
	"github.com/prodigy-action/prodigy-action/runner"
)

type realEngine struct{}

func (realEngine) Run(ctx context.Context, o runner.Options) (*runner.Result, error) {
	return runner.Run(ctx, o)
}

func (realEngine) RetryDLQ(ctx context.Context, o runner.RetryOptions) (*runner.Result, error) {
	return runner.RetryDLQ(ctx, o)
}

// actionEnv is the Action's dependencies plus its workflow-command writer.
type actionEnv struct {
	Deps
	gha *githubactions.Action
}

func newActionEnv(d Deps) *actionEnv {
	return &actionEnv{Deps: d, gha: githubactions.New(githubactions.WithGetenv(d.Getenv), githubactions.WithWriter(d.Stdout))}
}

// actionRun is the state of one Action invocation.
type actionRun struct {
	env     *actionEnv
	in      ghaction.Inputs
	ctx     *githubactions.GitHubContext
	owner   string
	repo    string
	redact  *redact.Redactor
	home    string
	ws      string
	notices []string
}

// run is the Action entrypoint: inputs → job → DLQ artifact → comment →
// summary → outputs → push → exit code.
func (e *actionEnv) run(ctx context.Context) int {
	in, err := ghaction.ReadInputs(e.gha)
	r := &actionRun{env: e, in: in, redact: e.redactor(in)}
	if err != nil {
		e.gha.Errorf("%s", r.redact.String(oneLine(err)))
		return exitUsage
	}
	if r.ctx, err = e.gha.Context(); err != nil {
		e.gha.Warningf("incomplete GitHub context: %s", oneLine(err))
	}
	if r.ctx == nil { // unreadable event file: go on without event data
		r.ctx = &githubactions.GitHubContext{}
	}
	r.owner, r.repo = r.ctx.Repo()
	if err := r.setup(); err != nil {
		e.gha.Errorf("%s", r.redact.String(err.Error()))
		return exitUsage
	}
	if code, ok := r.shardCommand(ctx); ok {
		return code
	}
	res, runErr := r.runJob(ctx)
	if res == nil {
		e.gha.Errorf("%s", r.redact.String(oneLine(runErr)))
		return runner.ExitCode(runErr)
	}
	if runErr != nil {
		e.gha.Errorf("job %s: %s", res.JobID, r.redact.String(oneLine(runErr)))
	}
	return r.finish(ctx, res, runErr)
}

// setup resolves the state directory and workspace and makes git trust the
// mounted workspace (it belongs to the runner user, the container is root).
func (r *actionRun) setup() error {
	e := r.env
	r.ws = e.Getenv("GITHUB_WORKSPACE")
	if r.ws == "" {
		wd, err := e.Getwd()
		if err != nil {
			return fmt.Errorf("locate the workspace: %w", err)
		}
		r.ws = wd
	}
	switch {
	case e.Getenv("PRODIGY_HOME") != "":
		r.home = e.Getenv("PRODIGY_HOME")
	case e.Getenv("RUNNER_TEMP") != "":
		// Outside the workspace: no root-owned state lands in the checkout.
		r.home = filepath.Join(e.Getenv("RUNNER_TEMP"), "prodigy")
	default:
		h, err := defaultHome(e.Getenv)
		if err != nil {
			return err
		}
		r.home = h
	}
	return addSafeDirectory(e.Getenv, e.Setenv, r.ws)
}

// runJob runs the workflow (command run) or redrives an earlier run's DLQ
// (command retry).
func (r *actionRun) runJob(ctx context.Context) (*runner.Result, error) {
	e := r.env
	opts := runner.Options{
		Home: r.home, RepoDir: r.ws, MaxParallel: r.in.MaxParallel, Stderr: e.Stderr,
		Getenv: e.Getenv, ClaudeCommand: r.in.ClaudeCommand, ClaudeArgs: r.in.ClaudeArgs, Clock: e.Clock,
		Hooks: &actionHooks{gha: e.gha, out: e.Stdout, redact: r.redact}, Environ: scrubEnv(e.Environ()), Redactor: r.redact,
	}
	// The engine's stderr carries step output and error text: no line of
	// it may act as a workflow command.
	opts.Stderr = ghaction.NeutralizeWriter(e.Stderr)
	if r.in.Command == "gather" {
		return r.gather(ctx, opts)
	}
	if r.in.Command == "retry" {
		jobID, err := r.restoreDLQ(ctx)
		if err != nil {
			return nil, err
		}
		return e.Engine.RetryDLQ(ctx, runner.RetryOptions{
			Home: r.home, JobID: jobID, Filter: r.in.RetryFilter, Force: r.in.RetryForce,
			Parallel: r.in.MaxParallel, Run: opts,
		})
	}
	wfPath := r.in.Workflow
	if !filepath.IsAbs(wfPath) {
		wfPath = filepath.Join(r.ws, wfPath)
	}
	v := runner.ValidateFile(wfPath, runner.ValidateOptions{})
	if err := v.Err(); err != nil {
		return nil, err
	}
	opts.Workflow = v.Workflow
	return e.Engine.Run(ctx, opts)
}

// finish publishes the result and returns the exit code.
func (r *actionRun) finish(ctx context.Context, res *runner.Result, runErr error) int {
	e := r.env
	rep, err := r.collect(res)
	if err != nil {
		e.gha.Warningf("read the DLQ: %s", r.redact.String(oneLine(err)))
	}
	rep = redactReport(r.redact, rep)
	art := r.uploadDLQ(ctx, res, rep)
	if art != nil {
		rep.Artifact = art
	}
	r.comment(ctx, res, rep)
	rep.Notices = append(rep.Notices, r.notices...)
	summary := r.redact.String(report.Summary(rep))
	summaryPath := r.writeSummary(res, summary)

	pushErr := r.push(ctx, res)
	if pushErr == nil && r.in.Push && res.ResultsBranch != "" {
		rep.Pushed = true
	}
	if e.Getenv("GITHUB_STEP_SUMMARY") != "" {
		if rep.Pushed { // re-render so the summary says "pushed"
			summary = r.redact.String(report.Summary(rep))
		}
		e.gha.AddStepSummary(summary)
	}
	r.setOutputs(res, art, summaryPath)

	code := exitOK
	if runErr != nil {
		code = runner.ExitCode(runErr)
	}
	if pushErr != nil {
		e.gha.Errorf("push %s: %s", res.ResultsBranch, r.redact.String(oneLine(pushErr)))
		code = max(code, exitJobFailed)
	}
	if code == exitOK && r.in.FailOnDLQ && res.DLQCount > 0 {
		e.gha.Errorf("%d item(s) in the dead letter queue (fail-on-dlq is set)", res.DLQCount)
		code = exitJobFailed
	}
	return code
}

func (r *actionRun) setOutputs(res *runner.Result, art *report.Artifact, summaryPath string) {
	if r.env.Getenv("GITHUB_OUTPUT") == "" {
		return
	}
	out := map[string]string{
		"job-id": res.JobID, "total": strconv.Itoa(res.Total), "successful": strconv.Itoa(res.Successful),
		"failed": strconv.Itoa(res.Failed), "dlq-count": strconv.Itoa(res.DLQCount),
		"results-branch": res.ResultsBranch, "dlq-artifact-name": "", "dlq-artifact-id": "", "summary-path": summaryPath,
	}
	if art != nil {
		out["dlq-artifact-name"], out["dlq-artifact-id"] = art.Name, strconv.FormatInt(art.ID, 10)
	}
	for _, k := range sortedKeys(out) {
		r.env.gha.SetOutput(k, out[k])
	}
}

// writeSummary keeps a copy of the summary for the summary-path output.
func (r *actionRun) writeSummary(res *runner.Result, summary string) string {
	dir := r.env.Getenv("RUNNER_TEMP")
	if dir == "" {
		dir = r.home
	}
	p := filepath.Join(dir, "prodigy-summary-"+res.JobID+".md")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		r.env.gha.Warningf("write summary copy: %s", oneLine(err))
		return ""
	}
	if err := os.WriteFile(p, []byte(summary), 0o644); err != nil {
		r.env.gha.Warningf("write summary copy: %s", oneLine(err))
		return ""
	}
	return p
}

// github returns an API client for GITHUB_API_URL with the input token.
func (r *actionRun) github() (*github.Client, error) {
	gh := github.NewClient(r.env.HTTPClient)
	if r.in.GitHubToken != "" {
		gh = gh.WithAuthToken(r.in.GitHubToken)
	}
	api := r.ctx.APIURL
	if api == "" {
		api = "https://api.github.com"
	}
	u, err := url.Parse(strings.TrimSuffix(api, "/") + "/")
	if err != nil {
		return nil, fmt.Errorf("parse GITHUB_API_URL %q: %w", api, err)
	}
	gh.BaseURL = u
	return gh, nil
}

// runURL is the web page of this workflow run.
func (r *actionRun) runURL() string {
	if r.ctx.ServerURL == "" || r.owner == "" || r.ctx.RunID == 0 {
		return ""
	}
	return fmt.Sprintf("%s/%s/%s/actions/runs/%d", r.ctx.ServerURL, r.owner, r.repo, r.ctx.RunID)
}

// redriveInfo is the ready-made `gh workflow run` line of the summary.
func (r *actionRun) redriveInfo(force bool) *report.Redrive {
	wf := r.in.RedriveWorkflow
	if wf == "" {
		// GITHUB_WORKFLOW_REF = owner/repo/.github/workflows/file.yml@ref
		ref, _, _ := strings.Cut(r.env.Getenv("GITHUB_WORKFLOW_REF"), "@")
		wf = path.Base(ref)
		if ref == "" {
			wf = ""
		}
	}
	branch := r.ctx.HeadRef // pull requests: the PR branch
	if branch == "" {
		branch = r.ctx.RefName
	}
	repo := ""
	if r.owner != "" {
		repo = r.owner + "/" + r.repo
	}
	return &report.Redrive{Workflow: wf, Ref: branch, Repo: repo, RunID: r.ctx.RunID, Force: force}
}

// redactReport redacts the text of a report before it is rendered:
// markdown escaping changes how a secret looks (ghp\_…), so the rendered
// summary and comment cannot be redacted reliably afterwards (they still
// are, as a second line). A report that does not survive the round trip is
// returned as it was.
func redactReport(red *redact.Redactor, in report.Input) report.Input {
	b, err := json.Marshal(in)
	if err != nil {
		return in
	}
	var out report.Input
	if err := json.Unmarshal(red.JSON(b), &out); err != nil {
		return in
	}
	return out
}

// redactor is the Action's redactor: secret-looking environment variables,
// the github-token input, the runtime tokens and the secret-values input.
// Every value is registered as a mask too (each line of a multi-line one,
// as the runner masks line by line), while commands are enabled.
func (e *actionEnv) redactor(in ghaction.Inputs) *redact.Redactor {
	vals := append([]string{in.GitHubToken, e.Getenv("ACTIONS_RUNTIME_TOKEN"), e.Getenv("ACTIONS_ID_TOKEN_REQUEST_TOKEN")}, in.SecretValues...)
	red := redact.New(redact.Config{Environ: e.Environ(), Values: vals})
	for _, v := range red.Values() {
		e.gha.AddMask(v)
		if strings.ContainsAny(v, "\r\n") {
			for _, line := range strings.FieldsFunc(v, func(c rune) bool { return c == '\n' || c == '\r' }) {
				if strings.TrimSpace(line) != "" {
					e.gha.AddMask(line)
				}
			}
		}
	}
	return red
}

// secretEnv are variables agents never see: the runtime tokens and the
// github-token input (workflows that want an agent to use a token pass it
// explicitly through the step's env), and the runner's file commands
// (outputs, environment, PATH, state, summary are the Action's alone).
var secretEnv = map[string]bool{
	"ACTIONS_RUNTIME_TOKEN": true, "ACTIONS_ID_TOKEN_REQUEST_TOKEN": true, "INPUT_GITHUB-TOKEN": true,
	"GITHUB_OUTPUT": true, "GITHUB_ENV": true, "GITHUB_PATH": true, "GITHUB_STATE": true, "GITHUB_STEP_SUMMARY": true,
}

// scrubEnv returns env without secretEnv entries.
func scrubEnv(env []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if !secretEnv[strings.ToUpper(k)] {
			out = append(out, kv)
		}
	}
	return out
}

// oneLine flattens an error for an annotation.
func oneLine(err error) string {
	if err == nil {
		return ""
	}
	return strings.Join(strings.Fields(strings.ReplaceAll(err.Error(), "\n", " ")), " ")
}
