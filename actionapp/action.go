package actionapp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-github/v60/github"
	"github.com/sethvargo/go-githubactions"

	"github.com/prodigy-action/prodigy-action/ghaction"
	"github.com/prodigy-action/prodigy-action/gitops"
	"github.com/prodigy-action/prodigy-action/redact"
	"github.com/prodigy-action/prodigy-action/report"
	"github.com/prodigy-action/prodigy-action/runner"
	"github.com/prodigy-action/prodigy-action/telemetry"
)

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
	// allowFork is the allow-fork-artifacts input.
	allowFork bool
	// commentKey is the comment-key input ("" derives the key).
	commentKey string
	// gitConfig is extra git configuration for every git process of the
	// run, the engine's and the agents' (safe.directory).
	gitConfig []gitops.ConfigEntry
	// pushURL is where origin pushed to before anything ran (push input).
	pushURL string
	// tracing exports the jobs' spans when the OTEL_* environment asks
	// for it (the workflow's env: reaches the container); nil otherwise.
	tracing *telemetry.Tracing
	// sig records the first signal (ctx ending).
	sig interrupt
	// wsReturned is set once the workspace went back to its owner.
	wsReturned bool
	// jobHome is set when the state directory is the job's own
	// ($RUNNER_TEMP/prodigy, discarded with the job): an interrupted job
	// cannot be resumed from it later.
	jobHome bool
}

// run is the Action entrypoint: inputs → job(s) → DLQ artifact → comment →
// summary → outputs → push → exit code.
func (e *actionEnv) run(ctx context.Context) int {
	in, err := ghaction.ReadInputs(e.gha)
	r := &actionRun{env: e, in: in, redact: e.redactor(in)}
	defer r.sig.watch(ctx)()
	err = errors.Join(err, r.readRedriveInputs(), r.claudeSettings().Validate())
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
	// Everything the container created under the workspace and
	// RUNNER_TEMP goes back to the workspace's owner (the runner user),
	// also when the job fails or is cancelled.
	defer r.handBack()
	r.tracing = telemetry.New(ctx, telemetry.Config{Getenv: e.Getenv, Redactor: r.redact,
		Warn: func(m string) { e.gha.Warningf("%s", r.redact.String(m)) }})
	defer func() { _ = r.tracing.Shutdown(context.WithoutCancel(ctx)) }()
	if err := r.prepareGit(ctx); err != nil {
		e.gha.Errorf("%s", r.redact.String(oneLine(err)))
		return exitUsage
	}
	if code, ok := r.shardCommand(ctx); ok {
		return code
	}
	outs, err := r.runJobs(ctx)
	if err != nil {
		e.gha.Errorf("%s", r.redact.String(oneLine(err)))
		return runner.ExitCode(err)
	}
	// Publishing goes on after a signal, until the cancel budget ends.
	pctx, stop := publishContext(ctx, &r.sig, e.Cancel.Publish)
	defer stop()
	return r.finish(pctx, outs)
}

// releaseWorktrees unregisters from the workspace's repository the
// worktrees an interrupted job left under a state directory of the job's
// own (its parent worktree, kept for a resume that cannot happen once the
// job's RUNNER_TEMP is gone): otherwise git in later steps sees the results
// branch checked out at a container path and refuses to delete it. Each is
// moved aside (one rename) for RUNNER_TEMP's cleanup. Failures are warnings.
func (r *actionRun) releaseWorktrees() {
	if !r.jobHome {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	git, err := gitops.New(r.ws, r.gitOptions())
	if err == nil {
		var wts []gitops.Worktree
		if wts, err = git.Worktrees(ctx); err == nil {
			for _, wt := range wts {
				if rel, rerr := filepath.Rel(r.home, wt.Path); rerr == nil && rel != ".." && !strings.HasPrefix(rel, "../") && !filepath.IsAbs(rel) {
					_, derr := git.WorktreeDetach(ctx, wt.Path, wt.Path+".released")
					err = errors.Join(err, derr)
				}
			}
		}
	}
	if err != nil {
		r.env.gha.Warningf("release the interrupted job's worktrees: %s", oneLine(err))
	}
}

// handBack gives the workspace (unless done already) and RUNNER_TEMP back
// to the runner's uid.
func (r *actionRun) handBack() {
	r.returnWorkspace()
	ghaction.RestoreRunnerOwnership(r.env.gha.Warningf, r.env.Getenv("RUNNER_TEMP"))
}

// returnWorkspace gives the workspace back to the runner's uid, once.
func (r *actionRun) returnWorkspace() {
	if !r.wsReturned {
		r.wsReturned = true
		ghaction.RestoreRunnerOwnership(r.env.gha.Warningf, r.ws)
	}
}

// readRedriveInputs reads the inputs of the redrive and the sticky
// comment: allow-fork-artifacts and comment-key.
func (r *actionRun) readRedriveInputs() error {
	var errs []error
	switch v := strings.ToLower(r.env.gha.GetInput("allow-fork-artifacts")); v {
	case "", "false":
	case "true":
		r.allowFork = true
	default:
		errs = append(errs, fmt.Errorf("input allow-fork-artifacts: %q is not true or false", v))
	}
	if k := r.env.gha.GetInput("comment-key"); k != "" {
		if err := validCommentKey(k); err != nil {
			errs = append(errs, fmt.Errorf("input comment-key: %w", err))
		}
		r.commentKey = k
	}
	if r.in.Command == "retry" && r.in.Workflow == "" {
		errs = append(errs, errors.New("input workflow is required for command retry: a redrive runs the workflow of the current checkout, never one from the artifact"))
	}
	return errors.Join(errs...)
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
		r.jobHome = true
	default:
		h, err := defaultHome(e.Getenv)
		if err != nil {
			return err
		}
		r.home = h
	}
	r.gitConfig = []gitops.ConfigEntry{{Key: "safe.directory", Value: r.ws}}
	return nil
}

// runJobs runs the workflow (command run: one job) or redrives an earlier
// run's DLQ artifacts (command retry: one job per artifact). An error
// means nothing ran.
func (r *actionRun) runJobs(ctx context.Context) ([]*jobOutcome, error) {
	e := r.env
	eng := r.engine()
	// The pool's files are deleted once everything is published (finish).
	eng.DeferTeardown = true
	if r.in.Command == "gather" {
		res, err := r.gather(ctx, eng)
		if res == nil {
			if err == nil {
				err = errors.New("gather returned no result")
			}
			return nil, err
		}
		return []*jobOutcome{{res: res, err: err}}, nil
	}
	if r.in.Command == "retry" {
		return r.redrive(ctx, e.Engine(eng), r.in.MaxCostUSD)
	}
	wf, err := r.loadWorkflow()
	if err != nil {
		return nil, err
	}
	res, err := e.Engine(eng).Run(ctx, runner.RunSpec{Workflow: wf, RepoDir: r.ws, Agents: r.agents(), MaxCostUSD: r.in.MaxCostUSD})
	if res == nil {
		if err == nil {
			err = errors.New("the engine returned no result")
		}
		return nil, err
	}
	return []*jobOutcome{{res: res, err: err}}, nil
}

// published is what publishing one job produced, for the outputs.
type published struct {
	res      *runner.Result
	dlqCount int
	art      *report.Artifact
	summary  string
}

// finish publishes every job (DLQ artifact, comment, summary, push) and
// returns the exit code: the worst of the jobs'. The jobs' pool worktrees
// are deleted after that (runner.Engine.DeferTeardown). After a signal
// the workspace goes back to the runner first, and the pool is left for
// RUNNER_TEMP's cleanup when ctx (the publishing budget) has ended.
func (r *actionRun) finish(ctx context.Context, outs []*jobOutcome) int {
	defer func() {
		if _, ok := r.sig.when(); ok {
			r.releaseWorktrees()
			r.returnWorkspace()
			if ctx.Err() != nil {
				r.env.gha.Warningf("cancelled: the pool worktrees under RUNNER_TEMP are left for the runner's cleanup")
				return
			}
		}
		for _, o := range outs {
			if o.res != nil && o.res.Teardown != nil {
				o.res.Teardown()
			}
		}
	}()
	e := r.env
	code := exitOK
	var pubs []published
	for _, o := range outs {
		if o.res == nil {
			e.gha.Errorf("%s", r.redact.String(oneLine(o.err)))
			code = max(code, runner.ExitCode(o.err))
			continue
		}
		if o.err != nil {
			e.gha.Errorf("job %s: %s", o.res.JobID, r.redact.String(oneLine(o.err)))
			code = max(code, runner.ExitCode(o.err))
		}
		p, pushErr := r.publish(ctx, o)
		pubs = append(pubs, p)
		if pushErr != nil {
			e.gha.Errorf("push %s: %s", o.res.ResultsBranch, r.redact.String(oneLine(pushErr)))
			code = max(code, exitJobFailed)
		}
	}
	if len(pubs) == 0 {
		return max(code, exitJobFailed)
	}
	var summaries []string
	dlqCount := 0
	for _, p := range pubs {
		summaries = append(summaries, p.summary)
		dlqCount += p.dlqCount
	}
	summary := strings.Join(summaries, "\n\n---\n\n")
	r.appendStepSummary(summary)
	summaryPath := r.writeSummary(pubs[0].res, summary)
	r.setOutputs(pubs, summaryPath)

	if code == exitOK && r.in.FailOnDLQ && dlqCount > 0 {
		e.gha.Errorf("%d item(s) in the dead letter queue (fail-on-dlq is set)", dlqCount)
		code = exitJobFailed
	}
	return code
}

// publish uploads one job's DLQ, updates the sticky comment, pushes the
// results branch and renders the job's summary section.
func (r *actionRun) publish(ctx context.Context, o *jobOutcome) (published, error) {
	e := r.env
	res := o.res
	rep, err := r.collect(res)
	if err != nil {
		e.gha.Warningf("read the DLQ: %s", r.redact.String(oneLine(err)))
	}
	rep = redactReport(r.redact, rep)
	if o.source != "" {
		rep.Notices = append(rep.Notices, fmt.Sprintf("Redrive of artifact %s of run %d with the workflow %s of this checkout.", o.source, r.in.RetryFromRun, r.in.Workflow))
	}
	for _, h := range o.held {
		rep.Notices = append(rep.Notices, fmt.Sprintf("Item %s was not redriven: its data was redacted in the artifact and could not be re-read from the current input; it stays in the dead letter queue.", h.ItemID))
	}
	pr := r.prNumber(o.meta.PRNumber)
	meta := artifactMeta{
		Format: metaFormat, CommentKey: r.commentKeyFor(o), JobID: res.JobID, PRNumber: pr,
		History: trimHistory(append(append([]historyEntry{}, o.meta.History...), historyEntry{
			RunID: r.ctx.RunID, RunAttempt: int(max(r.ctx.RunAttempt, 1)), Command: r.in.Command,
			Total: rep.Total, Successful: rep.Successful, Failed: rep.DLQCount, At: e.now().UTC(),
		})),
	}
	art := r.uploadDLQ(ctx, res, rep, meta)
	if art != nil {
		rep.Artifact = art
	}
	history := r.renderHistory(meta.History)
	r.comment(ctx, res, rep, pr, meta.CommentKey, r.legacyCommentKeys(o, meta.CommentKey), history)
	rep.Notices = append(rep.Notices, r.notices...)
	r.notices = nil

	pushErr := r.push(ctx, res)
	if pushErr == nil && r.in.Push && res.ResultsBranch != "" {
		rep.Pushed = true
	}
	summary := report.Summary(rep)
	if history != "" {
		summary += "\n" + history
	}
	return published{res: res, dlqCount: rep.DLQCount, art: art, summary: r.redact.String(summary)}, pushErr
}

// commentKeyFor is the sticky comment key of a job: the comment-key input,
// else the key carried by the redriven artifact, else this run's workflow
// file and job.
func (r *actionRun) commentKeyFor(o *jobOutcome) string {
	switch {
	case r.commentKey != "":
		return r.commentKey
	case o.meta.CommentKey != "":
		return o.meta.CommentKey
	}
	return r.defaultCommentKey()
}

// appendStepSummary appends markdown to GITHUB_STEP_SUMMARY; a file that
// cannot be written is a warning.
func (r *actionRun) appendStepSummary(markdown string) {
	p := r.env.Getenv("GITHUB_STEP_SUMMARY")
	if p == "" {
		return
	}
	f, err := os.OpenFile(p, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err == nil {
		_, err = io.WriteString(f, markdown+"\n")
		err = errors.Join(err, f.Close())
	}
	if err != nil {
		r.env.gha.Warningf("job summary not written (GITHUB_STEP_SUMMARY): %s", oneLine(err))
	}
}

// setOutputs sets the step outputs. With several jobs (a redrive of
// several artifacts) the counts are sums and job-id, results-branch,
// dlq-artifact-name and dlq-artifact-id list one value per job, separated
// by spaces, in the same order. A GITHUB_OUTPUT that cannot be written is
// an error annotation, not a crash.
func (r *actionRun) setOutputs(pubs []published, summaryPath string) {
	if r.env.Getenv("GITHUB_OUTPUT") == "" {
		return
	}
	var ids, branches, artNames, artIDs []string
	var total, ok, failed, dlqCount int
	var cost float64
	for _, p := range pubs {
		cost += p.res.CostUSD
		ids, branches = append(ids, p.res.JobID), append(branches, p.res.ResultsBranch)
		total, ok, failed, dlqCount = total+p.res.Total, ok+p.res.Successful, failed+p.res.Failed, dlqCount+p.dlqCount
		if p.art != nil {
			artNames, artIDs = append(artNames, p.art.Name), append(artIDs, strconv.FormatInt(p.art.ID, 10))
		}
	}
	out := map[string]string{
		"job-id": strings.Join(ids, " "), "total": strconv.Itoa(total), "successful": strconv.Itoa(ok),
		"failed": strconv.Itoa(failed), "dlq-count": strconv.Itoa(dlqCount),
		"results-branch": strings.Join(branches, " "), "dlq-artifact-name": strings.Join(artNames, " "),
		"dlq-artifact-id": strings.Join(artIDs, " "), "summary-path": summaryPath,
		"cost-usd": strconv.FormatFloat(cost, 'f', 4, 64),
	}
	defer func() {
		if p := recover(); p != nil { // go-githubactions panics on a write error
			r.env.gha.Errorf("outputs not written (GITHUB_OUTPUT): %v", p)
		}
	}()
	for _, k := range sortedKeys(out) {
		r.env.gha.SetOutput(k, out[k])
	}
}

// summaryDir is the workspace directory holding the summary copy; it
// ignores itself in git.
const summaryDir = ".prodigy-action"

// containerWorkspace is GITHUB_WORKSPACE inside the runner's container
// (the host directory is mounted there).
const containerWorkspace = "/github/workspace"

// writeSummary keeps a copy of the summary for the summary-path output and
// returns the path later steps can open. The copy goes into the
// workspace, the one directory later steps share with this container at a
// known place (RUNNER_TEMP is /github/runner_temp here but another path on
// the host, and outputs are not path-translated). Inside GitHub's
// container the path is relative to the workspace, the default working
// directory of later steps; elsewhere (act, local runs) it is absolute.
func (r *actionRun) writeSummary(res *runner.Result, summary string) string {
	dir := filepath.Join(r.ws, summaryDir)
	p := filepath.Join(dir, "summary-"+res.JobID+".md")
	err := os.MkdirAll(dir, 0o755)
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, ".gitignore"), []byte("*\n"), 0o644)
	}
	if err == nil {
		err = os.WriteFile(p, []byte(summary), 0o644)
	}
	if err != nil {
		r.env.gha.Warningf("write summary copy: %s", oneLine(err))
		return ""
	}
	return summaryOutputPath(r.ws, p)
}

// summaryOutputPath is the summary-path output for file p in workspace ws:
// relative to the workspace inside GitHub's container (whose paths do not
// exist on the host), else p.
func summaryOutputPath(ws, p string) string {
	if filepath.Clean(ws) == containerWorkspace {
		if rel, err := filepath.Rel(ws, p); err == nil {
			return filepath.ToSlash(rel)
		}
	}
	return p
}

// github returns an API client for GITHUB_API_URL with the input token.
func (r *actionRun) github() (*github.Client, error) {
	// Every REST call retries 429, rate limits, 5xx and transport errors.
	gh := github.NewClient(ghaction.WithRetry(r.env.HTTPClient, ghaction.RESTRetry{Clock: r.env.Clock}))
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
	vals = append(vals, telemetry.HeaderValues(e.Getenv)...) // a collector's API key
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
