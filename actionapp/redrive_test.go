package actionapp

import (
	"archive/zip"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-github/v60/github"

	"github.com/prodigy-action/prodigy-action/ghaction"
)

// craftedRecord is a DLQ record written by hand in the seeds' shape.
func craftedRecord(id, itemData string) string {
	return fmt.Sprintf(`{
  "item_id": %q,
  "item_data": %s,
  "first_attempt": "2026-01-01T00:00:00Z",
  "last_attempt": "2026-01-01T00:00:00Z",
  "failure_count": 1,
  "failure_history": [
    {"attempt_number": 1, "timestamp": "2026-01-01T00:00:00Z", "error_type": {"CommandFailed": {"exit_code": 3}},
     "error_message": "boom", "stack_trace": null, "agent_id": "agent-1", "step_failed": "shell", "duration_ms": 5, "json_log_location": null}
  ],
  "error_signature": "CommandFailed::boom",
  "worktree_artifacts": null,
  "reprocess_eligible": true,
  "manual_review_required": false
}
`, id, itemData)
}

// craftZip builds a zip by hand from name → content (not with our uploader).
func craftZip(t *testing.T, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, name := range sortedKeys(files) {
		w, err := zw.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte(files[name])); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// maliciousFiles is what a hostile run could upload: a workflow and a
// checkpoint whose steps and Claude command create sentinel, next to one
// valid record, one malformed record and one without an item id.
func maliciousFiles(sentinel, evilDir string) map[string]string {
	evilWorkflow := `name: evil
mode: mapreduce
setup:
  - shell: touch ` + sentinel + `
map:
  input: items.json
  json_path: "$.items[*]"
  agent_template:
    - shell: touch ` + sentinel + `
`
	return map[string]string{
		"items/item_2.json":   craftedRecord("item_2", `{"name":"z","broken":false}`),
		"items/bad.json":      `{"item_id": "item_9", "failure_history": [`,
		"items/noid.json":     `{"item_data": {"name": "q"}}`,
		"job/workflow.yml":    evilWorkflow,
		"job/checkpoint.json": `{"format_version":1,"job_id":"mapreduce-evil","repo":"repo","repo_dir":"` + evilDir + `","workflow_path":"` + filepath.Join(evilDir, "evil.yml") + `","claude_command":"/bin/sh -c 'touch ` + sentinel + `'","status":"failed","phase":"map","setup_completed":true,"items":[]}`,
		"dlq.json":            `[]`,
		"index.json":          `{"item_ids":["item_0"]}`,
	}
}

func TestRedriveCraftedArtifactRunsOnlyTheCheckoutWorkflow(t *testing.T) {
	t.Parallel()
	gh := newFakeGitHub(t)
	gh.runID = 777
	// The checkout's workflow with setup and reduce steps that log they ran.
	stateLog := filepath.Join(t.TempDir(), "phases.log")
	wf := strings.Replace(actionWorkflow, "mode: mapreduce\n", "mode: mapreduce\nsetup:\n  - shell: echo setup >> "+stateLog+"\n", 1) +
		"reduce:\n  - shell: echo \"reduce ${map.successful}/${map.total}\" >> " + stateLog + "\n"
	repo := cliRepo(t, map[string]string{"workflow.yml": wf, "items.json": actionItems})
	evilDir := t.TempDir()
	sentinel := filepath.Join(t.TempDir(), "SENTINEL")
	if err := os.WriteFile(filepath.Join(evilDir, "evil.yml"), []byte(maliciousFiles(sentinel, evilDir)["job/workflow.yml"]), 0o644); err != nil {
		t.Fatal(err)
	}
	gh.addArtifact(555, "prodigy-dlq-555-1", craftZip(t, maliciousFiles(sentinel, evilDir)), nil)
	at := newActionTest(t, gh, repo, map[string]string{
		"INPUT_COMMAND": "retry", "INPUT_RETRY-FROM-RUN": "555", "GITHUB_RUN_ID": "777",
		"GITHUB_EVENT_NAME": "workflow_dispatch", "INPUT_COMMENT": "never",
	})
	if code := at.run(t); code != exitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, at.out.String(), at.errb.String())
	}
	if _, err := os.Stat(sentinel); err == nil {
		t.Fatal("the artifact's workflow, checkpoint or Claude command ran: sentinel created")
	}
	out := at.outputs(t)
	if out["total"] != "1" || out["successful"] != "1" || out["dlq-count"] != "0" {
		t.Fatalf("outputs = %v", out)
	}
	// The checkout's workflow ran on the record's data: its step writes out-<name>.txt.
	if got := gitOut(t, repo, "show", out["results-branch"]+":out-z.txt"); got != "z" {
		t.Errorf("results branch out-z.txt = %q", got)
	}
	// setup ran once (a fresh job of the checkout's workflow), reduce once,
	// after the redriven item.
	if b, err := os.ReadFile(stateLog); err != nil || string(b) != "setup\nreduce 1/1\n" {
		t.Errorf("phases ran: %q (%v); want setup then reduce 1/1, once each", b, err)
	}
	log := at.out.String()
	for _, want := range []string{
		`skipped malformed DLQ record "items/bad.json"`,
		`skipped malformed DLQ record "items/noid.json": record has no item_id`,
		"ignored job/checkpoint.json, job/workflow.yml: a redrive imports DLQ records only",
		"redriving 1 DLQ artifact(s) of run 555 with workflow.yml: prodigy-dlq-555-1",
	} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q:\n%s", want, log)
		}
	}
}

func TestRedriveRefusesForkAndForeignRuns(t *testing.T) {
	t.Parallel()
	repo := cliRepo(t, map[string]string{"workflow.yml": actionWorkflow, "items.json": actionItems})
	fork := map[string]any{"id": 555, "event": "pull_request", "repository": map[string]any{"full_name": "o/r"},
		"head_repository": map[string]any{"full_name": "mallory/r", "fork": true}}
	sameNameFork := map[string]any{"id": 555, "event": "pull_request", "repository": map[string]any{"full_name": "o/r"},
		"head_repository": map[string]any{"full_name": "o/r", "fork": true}}
	deleted := map[string]any{"id": 555, "event": "pull_request", "repository": map[string]any{"full_name": "o/r"}}
	foreign := map[string]any{"id": 555, "event": "push", "repository": map[string]any{"full_name": "other/r"},
		"head_repository": map[string]any{"full_name": "other/r"}}
	tests := map[string]struct {
		run       map[string]any
		allowFork string
		want      string
	}{
		"fork":                   {fork, "", "the run's code came from the fork mallory/r"},
		"fork flag":              {sameNameFork, "", "the run's code came from the fork o/r"},
		"deleted head":           {deleted, "", "head repository is unknown"},
		"other repository":       {foreign, "true", `run 555 belongs to "other/r", not to this repository o/r`},
		"other repository fork?": {foreign, "false", "belongs to"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			gh := newFakeGitHub(t)
			gh.runID = 777
			gh.runs = map[string]map[string]any{"555": tc.run}
			sentinel := filepath.Join(t.TempDir(), "SENTINEL")
			gh.addArtifact(555, "prodigy-dlq-555-1", craftZip(t, maliciousFiles(sentinel, t.TempDir())), nil)
			at := newActionTest(t, gh, repo, map[string]string{
				"INPUT_COMMAND": "retry", "INPUT_RETRY-FROM-RUN": "555", "GITHUB_RUN_ID": "777",
				"GITHUB_EVENT_NAME": "workflow_dispatch", "INPUT_ALLOW-FORK-ARTIFACTS": tc.allowFork,
			})
			if code := at.run(t); code != exitUsage {
				t.Fatalf("exit %d, want 2\n%s", code, at.out.String())
			}
			if !strings.Contains(at.out.String(), "::error::untrusted run: ") || !strings.Contains(at.out.String(), tc.want) {
				t.Errorf("error does not say why (%q):\n%s", tc.want, at.out.String())
			}
			if gh.zipGets != 0 {
				t.Errorf("the refused run's artifact was downloaded %d time(s)", gh.zipGets)
			}
		})
	}

	// With allow-fork-artifacts the fork's records are imported, as data only.
	gh := newFakeGitHub(t)
	gh.runID = 777
	gh.runs = map[string]map[string]any{"555": fork}
	sentinel := filepath.Join(t.TempDir(), "SENTINEL")
	gh.addArtifact(555, "prodigy-dlq-555-1", craftZip(t, maliciousFiles(sentinel, t.TempDir())), nil)
	at := newActionTest(t, gh, repo, map[string]string{
		"INPUT_COMMAND": "retry", "INPUT_RETRY-FROM-RUN": "555", "GITHUB_RUN_ID": "777",
		"GITHUB_EVENT_NAME": "workflow_dispatch", "INPUT_ALLOW-FORK-ARTIFACTS": "true", "INPUT_COMMENT": "never",
	})
	if code := at.run(t); code != exitOK {
		t.Fatalf("allowed fork: exit %d\n%s", code, at.out.String())
	}
	if !strings.Contains(at.out.String(), "::warning::redriving run 555 although the run's code came from the fork mallory/r (allow-fork-artifacts is set)") {
		t.Errorf("no warning about the fork:\n%s", at.out.String())
	}
	if _, err := os.Stat(sentinel); err == nil {
		t.Error("sentinel created")
	}
}

// A matrix run uploads several DLQ artifacts: each is redriven (its own
// job), none silently ignored; artifact-name picks exactly one.
func TestRedriveEveryDLQArtifactOfTheRun(t *testing.T) {
	t.Parallel()
	repo := cliRepo(t, map[string]string{"workflow.yml": actionWorkflow, "items.json": actionItems})
	setup := func(t *testing.T) *fakeGitHub {
		gh := newFakeGitHub(t)
		gh.runID = 777
		gh.addArtifact(555, "prodigy-dlq-555-1", craftZip(t, map[string]string{"items/item_0.json": craftedRecord("item_0", `{"name":"m1","broken":false}`)}), nil)
		gh.addArtifact(555, "prodigy-dlq-555-1-2", craftZip(t, map[string]string{"items/item_0.json": craftedRecord("item_0", `{"name":"m2","broken":true}`)}), nil)
		gh.addArtifact(555, "unrelated", craftZip(t, map[string]string{"items/item_0.json": craftedRecord("item_0", `{"name":"no","broken":false}`)}), nil)
		return gh
	}
	env := map[string]string{"INPUT_COMMAND": "retry", "INPUT_RETRY-FROM-RUN": "555", "GITHUB_RUN_ID": "777",
		"GITHUB_EVENT_NAME": "workflow_dispatch", "INPUT_COMMENT": "never"}

	gh := setup(t)
	at := newActionTest(t, gh, repo, env)
	if code := at.run(t); code != exitOK {
		t.Fatalf("exit %d\n%s\n%s", code, at.out.String(), at.errb.String())
	}
	out := at.outputs(t)
	ids, branches := strings.Fields(out["job-id"]), strings.Fields(out["results-branch"])
	if len(ids) != 2 || len(branches) != 2 || out["total"] != "2" || out["successful"] != "1" || out["dlq-count"] != "1" {
		t.Fatalf("outputs = %v", out)
	}
	if got := gitOut(t, repo, "show", branches[0]+":out-m1.txt"); got != "m1" {
		t.Errorf("first artifact's item: %q", got)
	}
	if out["dlq-artifact-name"] != "prodigy-dlq-777-1" {
		t.Errorf("dlq-artifact-name = %q (only the second job still has a DLQ)", out["dlq-artifact-name"])
	}
	if !strings.Contains(at.out.String(), "redriving 2 DLQ artifact(s) of run 555 with workflow.yml: prodigy-dlq-555-1, prodigy-dlq-555-1-2") {
		t.Errorf("log does not list both artifacts:\n%s", at.out.String())
	}
	summary := at.file(t, "GITHUB_STEP_SUMMARY")
	if !strings.Contains(summary, "prodigy-dlq-555-1-2") || strings.Count(summary, "Redrive of artifact") != 2 {
		t.Errorf("summary does not cover both artifacts:\n%s", summary)
	}

	// artifact-name naming one artifact exactly redrives only that one.
	gh = setup(t)
	one := map[string]string{"INPUT_ARTIFACT-NAME": "prodigy-dlq-555-1-2"}
	for k, v := range env {
		one[k] = v
	}
	at = newActionTest(t, gh, repo, one)
	if code := at.run(t); code != exitOK {
		t.Fatalf("exit %d\n%s", code, at.out.String())
	}
	if out := at.outputs(t); len(strings.Fields(out["job-id"])) != 1 || out["total"] != "1" || out["dlq-count"] != "1" {
		t.Errorf("outputs = %v", out)
	}
}

// A record whose item_data was redacted is re-read by id from the current
// input when that item matches outside the masked parts; otherwise it is
// not run (it stays in the DLQ) and the reason is given.
func TestRedriveRedactedItemData(t *testing.T) {
	t.Parallel()
	gh := newFakeGitHub(t)
	gh.runID = 777
	repo := cliRepo(t, map[string]string{"workflow.yml": actionWorkflow, "items.json": actionItems})
	gh.addArtifact(555, "prodigy-dlq-555-1", craftZip(t, map[string]string{
		// item_0 is {"name":"a","broken":false} in the checkout.
		"items/item_0.json": craftedRecord("item_0", `{"broken":false,"name":"***"}`),
		// item_2 is {"name":"c",…}: the record does not match it.
		"items/item_2.json": craftedRecord("item_2", `{"broken":false,"name":"x***"}`),
		// no item_7 in the checkout's input.
		"items/item_7.json": craftedRecord("item_7", `{"broken":false,"name":"***"}`),
	}), nil)
	at := newActionTest(t, gh, repo, map[string]string{"INPUT_COMMAND": "retry", "INPUT_RETRY-FROM-RUN": "555",
		"GITHUB_RUN_ID": "777", "GITHUB_EVENT_NAME": "workflow_dispatch", "INPUT_COMMENT": "never"})
	if code := at.run(t); code != exitOK {
		t.Fatalf("exit %d\n%s\n%s", code, at.out.String(), at.errb.String())
	}
	out := at.outputs(t)
	if out["total"] != "1" || out["successful"] != "1" || out["dlq-count"] != "2" {
		t.Fatalf("outputs = %v", out)
	}
	if got := gitOut(t, repo, "show", out["results-branch"]+":out-a.txt"); got != "a" {
		t.Errorf("item_0 did not run on the re-read data: %q", got)
	}
	if strings.Contains(gitOut(t, repo, "ls-tree", "--name-only", out["results-branch"]), "***") {
		t.Error("an item ran on redacted data")
	}
	log := at.out.String()
	for _, want := range []string{
		"item item_0: its item_data was redacted in the artifact; redriving it with the item re-read from the current input",
		"item item_2 of artifact prodigy-dlq-555-1 is not redriven: its item_data was redacted when it was stored and the current input's item with that id differs from the record",
		"item item_7 of artifact prodigy-dlq-555-1 is not redriven: its item_data was redacted when it was stored and the current input has no item with that id",
	} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q:\n%s", want, log)
		}
	}
	files := gh.unzipped(t, "prodigy-dlq-777-1")
	if _, ok := files["items/item_2.json"]; !ok {
		t.Errorf("held record item_2 not kept in the new DLQ: %v", keys(files))
	}
}

// A missing run and expired artifacts are reported as such.
func TestRedriveRunNotFoundAndExpired(t *testing.T) {
	t.Parallel()
	repo := cliRepo(t, map[string]string{"workflow.yml": actionWorkflow, "items.json": actionItems})
	env := map[string]string{"INPUT_COMMAND": "retry", "GITHUB_RUN_ID": "777", "GITHUB_EVENT_NAME": "workflow_dispatch"}

	gh := newFakeGitHub(t)
	gh.runs = map[string]map[string]any{"999": nil}
	env["INPUT_RETRY-FROM-RUN"] = "999"
	at := newActionTest(t, gh, repo, env)
	if code := at.run(t); code != exitJobFailed {
		t.Fatalf("exit %d\n%s", code, at.out.String())
	}
	if !strings.Contains(at.out.String(), "::error::run 999 not found in o/r (or the token lacks `actions: read`)") {
		t.Errorf("not-found message:\n%s", at.out.String())
	}

	gh = newFakeGitHub(t)
	gh.addArtifact(555, "prodigy-dlq-555-1", craftZip(t, map[string]string{"items/item_0.json": craftedRecord("item_0", `{}`)}),
		map[string]any{"expired": true, "created_at": "2026-01-01T10:00:00Z", "expires_at": "2026-01-04T10:00:00Z"})
	env["INPUT_RETRY-FROM-RUN"] = "555"
	at = newActionTest(t, gh, repo, env)
	if code := at.run(t); code != exitJobFailed {
		t.Fatalf("exit %d\n%s", code, at.out.String())
	}
	if !strings.Contains(at.out.String(), "artifact prodigy-dlq-555-1 expired on 2026-01-04 (retention 3 days)") {
		t.Errorf("expiry message:\n%s", at.out.String())
	}
}

// An unwritable GITHUB_STEP_SUMMARY is a warning; the job still succeeds.
func TestUnwritableStepSummaryIsAWarning(t *testing.T) {
	t.Parallel()
	gh := newFakeGitHub(t)
	gh.runID = 555
	repo := cliRepo(t, map[string]string{"workflow.yml": actionWorkflow, "items.json": actionItems})
	at := newActionTest(t, gh, repo, map[string]string{"GITHUB_STEP_SUMMARY": filepath.Join(t.TempDir(), "no", "such", "dir", "summary")})
	if code := at.run(t); code != exitOK {
		t.Fatalf("exit %d\n%s", code, at.out.String())
	}
	if !strings.Contains(at.out.String(), "::warning::job summary not written (GITHUB_STEP_SUMMARY): ") {
		t.Errorf("no warning:\n%s", at.out.String())
	}
	if at.outputs(t)["summary-path"] == "" {
		t.Error("no summary-path")
	}
}

func TestSummaryPathForLaterSteps(t *testing.T) {
	t.Parallel()
	if got := summaryOutputPath(containerWorkspace, filepath.Join(containerWorkspace, summaryDir, "summary-j.md")); got != ".prodigy-action/summary-j.md" {
		t.Errorf("in the container: %q", got)
	}
	if got := summaryOutputPath("/home/runner/work/r/r", "/home/runner/work/r/r/.prodigy-action/summary-j.md"); got != "/home/runner/work/r/r/.prodigy-action/summary-j.md" {
		t.Errorf("on the host: %q", got)
	}
}

func TestGlobMatch(t *testing.T) {
	t.Parallel()
	tests := []struct {
		pattern, s string
		want       bool
	}{
		{"***", "secret", true},
		{"***", "", false},
		{"token ***", "token abc", true},
		{"token ***", "token ", false},
		{"a***b***c", "aXbYc", true},
		{"a***b***c", "abc", false},
		{"a***b***c", "aXbc", false},
		{"plain", "plain", true},
		{"plain", "other", false},
		{"x***", "c", false},
	}
	for _, tc := range tests {
		if got := globMatch(tc.pattern, tc.s); got != tc.want {
			t.Errorf("globMatch(%q, %q) = %v, want %v", tc.pattern, tc.s, got, tc.want)
		}
	}
}

func TestParseMetaValidates(t *testing.T) {
	t.Parallel()
	m, warns := parseMeta([]byte(`{"format":1,"comment_key":"x -->\u202e<script>","job_id":"../../etc","pr_number":-3,
		"history":[{"run_id":1,"run_attempt":1,"command":"run","total":1,"successful":0,"failed":1,"at":"2026-01-01T00:00:00Z"},
		{"run_id":2,"command":"rm -rf /"}]}`))
	if m.CommentKey != "" || m.JobID != "" || m.PRNumber != 0 || len(m.History) != 1 || len(warns) != 4 {
		t.Errorf("meta = %+v, warnings %q", m, warns)
	}
	if _, warns := parseMeta([]byte(`{"format":2}`)); len(warns) != 1 {
		t.Errorf("format 2 accepted: %q", warns)
	}
}

func TestSelectArtifacts(t *testing.T) {
	t.Parallel()
	art := func(id int64, name string, expired bool) *github.Artifact {
		return &github.Artifact{ID: github.Int64(id), Name: github.String(name), Expired: github.Bool(expired)}
	}
	all := []*github.Artifact{art(3, "dlq-5-1-2", false), art(1, "dlq-5-1", false), art(2, "dlqx-5-1", false), art(4, "other", false), art(5, "dlq-5-2", true)}
	names := func(as []*github.Artifact) string {
		var s []string
		for _, a := range as {
			s = append(s, a.GetName())
		}
		return strings.Join(s, " ")
	}
	if got, err := selectArtifacts(all, "dlq", 5); err != nil || names(got) != "dlq-5-1 dlq-5-1-2" {
		t.Errorf("prefix: %q, %v", names(got), err)
	}
	if got, err := selectArtifacts(all, "dlq-5-1-2", 5); err != nil || names(got) != "dlq-5-1-2" {
		t.Errorf("exact: %q, %v", names(got), err)
	}
	if _, err := selectArtifacts(all, "dlq-5-2", 5); err == nil || !strings.Contains(err.Error(), "artifact dlq-5-2 has expired") {
		t.Errorf("exact but expired: %v", err)
	}
	if _, err := selectArtifacts(all, "none", 5); !errors.Is(err, ghaction.ErrNoArtifact) {
		t.Errorf("no match: %v", err)
	}
}

// push: true pushes the results branch to origin (git through gitops).
func TestActionModePushesResultsBranch(t *testing.T) {
	t.Parallel()
	gh := newFakeGitHub(t)
	gh.runID = 555
	repo := cliRepo(t, map[string]string{"workflow.yml": actionWorkflow, "items.json": actionItems})
	origin := filepath.Join(t.TempDir(), "origin.git")
	gitOut(t, repo, "init", "-q", "--bare", origin)
	gitOut(t, repo, "remote", "add", "origin", origin)
	at := newActionTest(t, gh, repo, map[string]string{"INPUT_PUSH": "true", "INPUT_COMMENT": "never"})
	if code := at.run(t); code != exitOK {
		t.Fatalf("exit %d\n%s\n%s", code, at.out.String(), at.errb.String())
	}
	branch := at.outputs(t)["results-branch"]
	if got, want := gitOut(t, origin, "rev-parse", "refs/heads/"+branch), gitOut(t, repo, "rev-parse", "refs/heads/"+branch); got != want {
		t.Errorf("origin has %s at %q, local %q", branch, got, want)
	}
	if s := at.file(t, "GITHUB_STEP_SUMMARY"); !strings.Contains(s, "pushed") || strings.Contains(s, "not pushed") {
		t.Errorf("summary does not say pushed:\n%s", at.file(t, "GITHUB_STEP_SUMMARY"))
	}
}

// retry-signature and retry-sample reach the engine: the canary of the
// cluster succeeds, so the rest of the cluster runs, and the record with
// another signature is not redriven.
func TestRedriveCanaryInputs(t *testing.T) {
	t.Parallel()
	repo := cliRepo(t, map[string]string{"workflow.yml": actionWorkflow, "items.json": actionItems})
	gh := newFakeGitHub(t)
	gh.runID = 777
	other := strings.Replace(craftedRecord("item_2", `{"name":"m3","broken":false}`), "CommandFailed::boom", "CommandFailed::other", 1)
	gh.addArtifact(555, "prodigy-dlq-555-1", craftZip(t, map[string]string{
		"items/item_0.json": craftedRecord("item_0", `{"name":"m1","broken":false}`),
		"items/item_1.json": craftedRecord("item_1", `{"name":"m2","broken":false}`),
		"items/item_2.json": other,
	}), nil)
	at := newActionTest(t, gh, repo, map[string]string{"INPUT_COMMAND": "retry", "INPUT_RETRY-FROM-RUN": "555", "GITHUB_RUN_ID": "777",
		"GITHUB_EVENT_NAME": "workflow_dispatch", "INPUT_COMMENT": "never",
		"INPUT_RETRY-SIGNATURE": "CommandFailed::boom", "INPUT_RETRY-SAMPLE": "1"})
	if code := at.run(t); code != exitOK {
		t.Fatalf("exit %d\n%s\n%s", code, at.out.String(), at.errb.String())
	}
	if at.retry.Signature != "CommandFailed::boom" || at.retry.Sample != 1 {
		t.Errorf("engine got signature %q sample %d", at.retry.Signature, at.retry.Sample)
	}
	out := at.outputs(t)
	if out["successful"] != "2" || out["dlq-count"] != "1" {
		t.Errorf("outputs = %v", out)
	}
	branch := out["results-branch"]
	if got := gitOut(t, repo, "show", branch+":out-m2.txt"); got != "m2" {
		t.Errorf("rest of the cluster: %q", got)
	}
}
