package actionapp

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prodigy-action/prodigy-action/ghaction/ghactiontest"
	"github.com/prodigy-action/prodigy-action/gitops"
	"github.com/prodigy-action/prodigy-action/redact"
	"github.com/prodigy-action/prodigy-action/report"
	"github.com/prodigy-action/prodigy-action/retry/retrytest"
	"github.com/prodigy-action/prodigy-action/runner"
)

const testToken = "ghs_TESTTOKEN_abc123"

// fakeGitHub serves the REST endpoints the Action uses (issue comments,
// run artifacts with a 302 to blob storage) and the v4 artifact service
// (Twirp JSON + Put Block/Put Block List) from one httptest server.
type fakeGitHub struct {
	t        *testing.T
	srv      *httptest.Server
	mu       sync.Mutex
	forkPR   bool
	comments []map[string]any
	patches  int
	blocks   map[string][]byte         // artifact name → uploaded bytes
	arts     []map[string]any          // finalized: {id, name, run[, expired, created_at, expires_at]}
	runID    int64                     // run whose artifacts the current token addresses
	runs     map[string]map[string]any // run objects by id; missing ids get a same-repository run
	zipGets  int                       // artifact zip downloads
	hang     atomic.Bool               // artifact-service calls hang until the client gives up
	// approvals are the review histories of runs by id
	// (GET …/actions/runs/{id}/approvals); none: an empty list.
	approvals map[string][]map[string]any
}

func newFakeGitHub(t *testing.T) *fakeGitHub {
	f := &fakeGitHub{t: t, blocks: map[string][]byte{}}
	mux := http.NewServeMux()
	mux.HandleFunc("/api/repos/o/r/issues/7/comments", f.issueComments)
	mux.HandleFunc("/api/repos/o/r/issues/comments/", f.editComment)
	mux.HandleFunc("/api/repos/o/r/actions/runs/", f.runEndpoints)
	mux.HandleFunc("/api/repos/o/r/actions/artifacts/", f.artifactZip)
	mux.HandleFunc("/twirp/github.actions.results.api.v1.ArtifactService/", f.twirp)
	mux.HandleFunc("/blob/", f.blob)
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeGitHub) auth(w http.ResponseWriter, r *http.Request, want string) bool {
	if got := r.Header.Get("Authorization"); got != want {
		f.t.Errorf("%s %s: Authorization %q, want %q", r.Method, r.URL.Path, got, want)
		w.WriteHeader(http.StatusUnauthorized)
		return false
	}
	return true
}

func (f *fakeGitHub) issueComments(w http.ResponseWriter, r *http.Request) {
	if !f.auth(w, r, "Bearer "+testToken) {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	switch r.Method {
	case http.MethodGet:
		_ = json.NewEncoder(w).Encode(f.comments)
	case http.MethodPost:
		if f.forkPR {
			w.WriteHeader(http.StatusForbidden)
			_, _ = io.WriteString(w, `{"message":"Resource not accessible by integration"}`)
			return
		}
		var in struct{ Body string }
		_ = json.NewDecoder(r.Body).Decode(&in)
		c := map[string]any{"id": 900 + len(f.comments), "body": in.Body, "user": map[string]any{"login": "github-actions[bot]", "type": "Bot"}}
		f.comments = append(f.comments, c)
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(c)
	}
}

func (f *fakeGitHub) editComment(w http.ResponseWriter, r *http.Request) {
	if !f.auth(w, r, "Bearer "+testToken) {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var in struct{ Body string }
	_ = json.NewDecoder(r.Body).Decode(&in)
	id := strings.TrimPrefix(r.URL.Path, "/api/repos/o/r/issues/comments/")
	for _, c := range f.comments {
		if fmt.Sprint(c["id"]) == id {
			c["body"] = in.Body
			f.patches++
			_ = json.NewEncoder(w).Encode(c)
			return
		}
	}
	w.WriteHeader(http.StatusNotFound)
}

// runEndpoints serves GET …/actions/runs/{id} and …/runs/{id}/artifacts.
func (f *fakeGitHub) runEndpoints(w http.ResponseWriter, r *http.Request) {
	if !f.auth(w, r, "Bearer "+testToken) {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	rest := strings.TrimPrefix(r.URL.Path, "/api/repos/o/r/actions/runs/")
	if run, ok := strings.CutSuffix(rest, "/approvals"); ok {
		list := f.approvals[run]
		if list == nil {
			list = []map[string]any{}
		}
		_ = json.NewEncoder(w).Encode(list)
		return
	}
	run, isList := strings.CutSuffix(rest, "/artifacts")
	obj, ok := f.runs[run]
	if !ok {
		same := map[string]any{"full_name": "o/r", "fork": false}
		obj = map[string]any{"id": json.Number(run), "event": "pull_request", "path": ".github/workflows/example.yml",
			"repository": same, "head_repository": same}
	}
	if obj == nil {
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, `{"message":"Not Found"}`)
		return
	}
	if !isList {
		_ = json.NewEncoder(w).Encode(obj)
		return
	}
	list := []map[string]any{}
	for _, a := range f.arts {
		if fmt.Sprint(a["run"]) == run {
			e := map[string]any{"id": a["id"], "name": a["name"], "expired": a["expired"] == true}
			for _, k := range []string{"created_at", "expires_at"} {
				if v, ok := a[k]; ok {
					e[k] = v
				}
			}
			list = append(list, e)
		}
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"total_count": len(list), "artifacts": list})
}

// addArtifact stores a zip made by the test as an artifact of run.
func (f *fakeGitHub) addArtifact(run int64, name string, data []byte, extra map[string]any) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	id := 5000 + len(f.arts)
	a := map[string]any{"id": id, "name": name, "run": run}
	for k, v := range extra {
		a[k] = v
	}
	f.arts = append(f.arts, a)
	f.blocks[name] = data
	return id
}

func (f *fakeGitHub) artifactZip(w http.ResponseWriter, r *http.Request) {
	if !f.auth(w, r, "Bearer "+testToken) {
		return
	}
	id := strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/api/repos/o/r/actions/artifacts/"), "/zip")
	f.mu.Lock()
	f.zipGets++
	f.mu.Unlock()
	http.Redirect(w, r, f.srv.URL+"/blob/download?id="+id+"&sig=x", http.StatusFound)
}

func (f *fakeGitHub) twirp(w http.ResponseWriter, r *http.Request) {
	if f.hang.Load() {
		// The body is read first: only then does the server notice the
		// client going away (and end r.Context()).
		_, _ = io.Copy(io.Discard, r.Body)
		<-r.Context().Done()
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var req map[string]any
	_ = json.NewDecoder(r.Body).Decode(&req)
	name, _ := req["name"].(string)
	method := strings.TrimPrefix(r.URL.Path, "/twirp/github.actions.results.api.v1.ArtifactService/")
	if !strings.HasPrefix(r.Header.Get("Authorization"), "Bearer ey") {
		f.t.Errorf("twirp %s without the runtime token", method)
	}
	out := map[string]any{"ok": true}
	switch method {
	case "CreateArtifact":
		if req["workflow_run_backend_id"] != "run-b" || req["version"] != float64(4) {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		for _, a := range f.arts {
			if a["name"] == name && fmt.Sprint(a["run"]) == fmt.Sprint(f.runID) {
				w.WriteHeader(http.StatusConflict)
				_, _ = io.WriteString(w, `{"code":"already_exists","msg":"an artifact with this name already exists on the workflow run"}`)
				return
			}
		}
		out["signed_upload_url"] = f.srv.URL + "/blob/" + name + "?sig=s1"
	case "FinalizeArtifact":
		id := 3000 + len(f.arts)
		f.arts = append(f.arts, map[string]any{"id": id, "name": name, "run": f.runID})
		out["artifact_id"] = fmt.Sprint(id)
	default:
		w.WriteHeader(http.StatusNotFound)
		return
	}
	_ = json.NewEncoder(w).Encode(out)
}

func (f *fakeGitHub) blob(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "" {
		f.t.Errorf("credentials sent to blob storage")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	name := strings.TrimPrefix(r.URL.Path, "/blob/")
	if r.Method == http.MethodGet {
		for _, a := range f.arts {
			if fmt.Sprint(a["id"]) == r.URL.Query().Get("id") {
				_, _ = w.Write(f.blocks[a["name"].(string)])
				return
			}
		}
		w.WriteHeader(http.StatusNotFound)
		return
	}
	body, _ := io.ReadAll(r.Body)
	if r.URL.Query().Get("comp") == "block" {
		f.blocks[name] = append(f.blocks[name], body...)
	}
	w.WriteHeader(http.StatusCreated)
}

// unzipped returns the files of the artifact uploaded as name.
func (f *fakeGitHub) unzipped(t *testing.T, name string) map[string]string {
	t.Helper()
	f.mu.Lock()
	data := f.blocks[name]
	f.mu.Unlock()
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatalf("artifact %s: %v", name, err)
	}
	files := map[string]string{}
	for _, zf := range zr.File {
		rc, _ := zf.Open()
		b, _ := io.ReadAll(rc)
		rc.Close()
		files[zf.Name] = string(b)
	}
	return files
}

func runtimeToken() string {
	enc := base64.RawURLEncoding
	return enc.EncodeToString([]byte(`{"alg":"none"}`)) + "." + enc.EncodeToString([]byte(`{"scp":"Actions.Results:run-b:job-b"}`)) + ".sig"
}

// A real pull_request payload, trimmed to the fields a consumer reads.
const pullRequestEvent = `{
  "action": "synchronize",
  "number": 7,
  "pull_request": {
    "number": 7, "state": "open", "title": "Fix lints",
    "head": {"ref": "feature", "sha": "0123456789abcdef0123456789abcdef01234567", "repo": {"full_name": "fork/r", "fork": true}},
    "base": {"ref": "main", "repo": {"full_name": "o/r"}},
    "user": {"login": "contributor"}
  },
  "repository": {"full_name": "o/r", "name": "r", "owner": {"login": "o"}},
  "sender": {"login": "contributor"}
}`

const actionWorkflow = `name: action-test
mode: mapreduce
map:
  input: items.json
  json_path: "$.items[*]"
  max_parallel: 2
  agent_template:
    - shell: |
        if [ "${item.broken}" = "true" ]; then echo "cannot do ${item.name}: token ` + testToken + `" >&2; exit 3; fi
        echo "${item.name}" > "out-${item.name}.txt"
        git add . && git commit -qm "do ${item.name}"
  error_policy:
    on_item_failure: dlq
    retry_config:
      attempts: 2
      backoff: fixed
      initial_delay: 10ms
`

const actionItems = `{"items":[{"name":"a","broken":false},{"name":"b","broken":true},{"name":"c","broken":false}]}`

type actionTest struct {
	env      map[string]string
	out      bytes.Buffer
	errb     bytes.Buffer
	engine   *runner.Engine     // the engine the Action built
	runSpec  *runner.RunSpec    // what the Action passed to Engine.Run
	retry    runner.RedriveSpec // what the Action passed to Engine.Redrive
	repo     string
	temp     string
	ghServer *fakeGitHub
}

func newActionTest(t *testing.T, gh *fakeGitHub, repo string, inputs map[string]string) *actionTest {
	t.Helper()
	temp := t.TempDir()
	event := filepath.Join(temp, "event.json")
	if err := os.WriteFile(event, []byte(pullRequestEvent), 0o644); err != nil {
		t.Fatal(err)
	}
	at := &actionTest{repo: repo, temp: temp, ghServer: gh}
	at.env = map[string]string{
		"GITHUB_ACTIONS": "true", "CI": "true", "HOME": temp,
		"GITHUB_WORKSPACE": repo, "RUNNER_TEMP": filepath.Join(temp, "runner_temp"),
		"GITHUB_OUTPUT": filepath.Join(temp, "output"), "GITHUB_STEP_SUMMARY": filepath.Join(temp, "summary"),
		"GITHUB_EVENT_PATH": event, "GITHUB_EVENT_NAME": "pull_request",
		"GITHUB_REPOSITORY": "o/r", "GITHUB_REPOSITORY_OWNER": "o", "GITHUB_RUN_ID": "555", "GITHUB_RUN_ATTEMPT": "1",
		"GITHUB_WORKFLOW": "example", "GITHUB_JOB": "fanout", "GITHUB_HEAD_REF": "feature", "GITHUB_REF_NAME": "7/merge",
		"GITHUB_WORKFLOW_REF": "o/r/.github/workflows/example.yml@refs/pull/7/merge",
		"GITHUB_API_URL":      gh.srv.URL + "/api", "GITHUB_SERVER_URL": "https://github.com", "GITHUB_RETENTION_DAYS": "90",
		"ACTIONS_RUNTIME_TOKEN": runtimeToken(), "ACTIONS_RESULTS_URL": gh.srv.URL + "/",
		"INPUT_WORKFLOW": "workflow.yml", "INPUT_COMMAND": "run", "INPUT_GITHUB-TOKEN": testToken,
		"INPUT_COMMENT": "always", "INPUT_ARTIFACT-NAME": "prodigy-dlq", "INPUT_ARTIFACT-RETENTION-DAYS": "3",
		"INPUT_PUSH": "false", "INPUT_FAIL-ON-DLQ": "false", "INPUT_REDRIVE-WORKFLOW": "redrive.yml",
	}
	for k, v := range inputs {
		at.env[k] = v
	}
	return at
}

func (at *actionTest) run(t *testing.T) int {
	t.Helper()
	return Main(context.Background(), Deps{
		Getenv: func(k string) string { return at.env[k] }, Stdout: &at.out, Stderr: &at.errb,
		Clock:      retrytest.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)), // no real backoff sleeps
		RetrySleep: func(context.Context, time.Duration) error { return nil },
		Engine:     at.recordingEngine,
	})
}

func (at *actionTest) outputs(t *testing.T) map[string]string {
	t.Helper()
	raw, err := os.ReadFile(at.env["GITHUB_OUTPUT"])
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	lines := strings.Split(string(raw), "\n")
	for i := 0; i+2 < len(lines); i += 3 {
		name, _, _ := strings.Cut(lines[i], "<<")
		out[name] = lines[i+1]
	}
	return out
}

func (at *actionTest) file(t *testing.T, key string) string {
	t.Helper()
	raw, err := os.ReadFile(at.env[key])
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

func TestActionModeRunPublishesEverything(t *testing.T) {
	t.Parallel()
	gh := newFakeGitHub(t)
	gh.runID = 555
	repo := cliRepo(t, map[string]string{"workflow.yml": actionWorkflow, "items.json": actionItems})
	at := newActionTest(t, gh, repo, nil)

	if code := at.run(t); code != exitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, at.out.String(), at.errb.String())
	}
	out := at.outputs(t)
	want := map[string]string{"total": "3", "successful": "2", "failed": "1", "dlq-count": "1",
		"dlq-artifact-name": "prodigy-dlq-555-1", "dlq-artifact-id": "3000"}
	for k, v := range want {
		if out[k] != v {
			t.Errorf("output %s = %q, want %q (all: %v)", k, out[k], v, out)
		}
	}
	if !strings.HasPrefix(out["job-id"], "mapreduce-") || out["results-branch"] != "prodigy/"+out["job-id"] {
		t.Errorf("job-id %q, results-branch %q", out["job-id"], out["results-branch"])
	}
	// safe.directory reaches the engine's git and the agents' git through
	// their own environments, not ours.
	if want := (gitops.ConfigEntry{Key: "safe.directory", Value: repo}); !slices.Contains(at.engine.Git.Config, want) {
		t.Errorf("engine git config = %v, want %v", at.engine.Git.Config, want)
	}
	if env := strings.Join(at.engine.Environ, "\n"); !strings.Contains(env, "=safe.directory\n") || !strings.Contains(env, "="+repo+"\n") {
		t.Errorf("agents' environment lacks safe.directory:\n%s", env)
	}
	for _, kv := range at.engine.Git.Env {
		if strings.Contains(kv, testToken) || strings.HasPrefix(kv, "ACTIONS_RUNTIME_TOKEN=") {
			t.Errorf("engine git environment carries a token: %s", kv)
		}
	}

	summary := at.file(t, "GITHUB_STEP_SUMMARY")
	for _, s := range []string{"| Total |", "| 3 | 2 | 1 | 0 | 0 | 1 |", "| item\\_1 | CommandFailed |",
		"gh workflow run redrive.yml --repo o/r --ref feature -f retry-from-run=555",
		"[prodigy-dlq-555-1](https://github.com/o/r/actions/runs/555/artifacts/3000)", "expires "} {
		if !strings.Contains(summary, s) {
			t.Errorf("summary lacks %q:\n%s", s, summary)
		}
	}
	if copyPath := out["summary-path"]; copyPath == "" {
		t.Error("no summary-path output")
	} else if b, err := os.ReadFile(copyPath); err != nil || strings.TrimSpace(string(b)) != strings.TrimSpace(summary) {
		t.Errorf("summary-path copy differs (%v)", err)
	}

	if len(gh.comments) != 1 {
		t.Fatalf("comments = %d, want 1", len(gh.comments))
	}
	body := gh.comments[0]["body"].(string)
	if !strings.Contains(body, "<!-- prodigy-action:sticky-comment key=example.yml / fanout -->") || !strings.Contains(body, "item\\_1") {
		t.Errorf("comment body:\n%s", body)
	}

	files := gh.unzipped(t, "prodigy-dlq-555-1")
	for _, f := range []string{"items/item_1.json", "index.json", "dlq.json", "meta.json"} {
		if _, ok := files[f]; !ok {
			t.Errorf("artifact lacks %s (has %v)", f, keys(files))
		}
	}
	if len(files) != 4 {
		t.Errorf("artifact holds %v; want records, index, dlq.json and meta.json only (nothing executable)", keys(files))
	}
	var meta artifactMeta
	if err := json.Unmarshal([]byte(files["meta.json"]), &meta); err != nil || meta.CommentKey != "example.yml / fanout" ||
		meta.PRNumber != 7 || len(meta.History) != 1 || meta.History[0].RunID != 555 || meta.History[0].Failed != 1 {
		t.Errorf("meta.json = %s (%v)", files["meta.json"], err)
	}
	var arr []map[string]any
	if err := json.Unmarshal([]byte(files["dlq.json"]), &arr); err != nil || len(arr) != 1 || arr[0]["failure_count"] != float64(2) {
		t.Errorf("dlq.json = %s (%v)", files["dlq.json"], err)
	}

	// The token never leaves in clear text; it is masked in the log.
	for where, text := range map[string]string{"summary": summary, "comment": body, "outputs": at.file(t, "GITHUB_OUTPUT")} {
		if strings.Contains(text, testToken) {
			t.Errorf("%s contains the token", where)
		}
	}
	for name, content := range files {
		if strings.Contains(content, testToken) {
			t.Errorf("artifact file %s contains the token", name)
		}
	}
	if !strings.Contains(at.out.String(), "::add-mask::"+testToken) {
		t.Error("token not masked")
	}
	if !strings.Contains(at.out.String(), "::group::item item_1: dlq (2 attempt(s))") || !strings.Contains(at.out.String(), "::error title=item item_1::") {
		t.Errorf("log lacks the item group/annotation:\n%s", at.out.String())
	}

	// A second run on the same PR edits the comment instead of adding one.
	at2 := newActionTest(t, gh, repo, map[string]string{"GITHUB_RUN_ATTEMPT": "2"})
	if code := at2.run(t); code != exitOK {
		t.Fatalf("second run: exit %d\n%s", code, at2.out.String())
	}
	if len(gh.comments) != 1 || gh.patches != 1 {
		t.Errorf("comments %d, patches %d; want the sticky comment edited", len(gh.comments), gh.patches)
	}
	if got := at2.outputs(t)["dlq-artifact-name"]; got != "prodigy-dlq-555-2" {
		t.Errorf("second artifact = %q", got)
	}
}

func TestActionModeForkPRAndFailOnDLQ(t *testing.T) {
	t.Parallel()
	gh := newFakeGitHub(t)
	gh.forkPR = true
	repo := cliRepo(t, map[string]string{"workflow.yml": actionWorkflow, "items.json": actionItems})
	at := newActionTest(t, gh, repo, map[string]string{"INPUT_FAIL-ON-DLQ": "true"})
	if code := at.run(t); code != exitJobFailed {
		t.Fatalf("exit %d, want 1 (fail-on-dlq)\n%s", code, at.out.String())
	}
	summary := at.file(t, "GITHUB_STEP_SUMMARY")
	if !strings.Contains(summary, "Could not comment on PR #\u200b7") {
		t.Errorf("summary lacks the fork notice:\n%s", summary)
	}
	if !strings.Contains(at.out.String(), "::notice::Could not comment on PR #7") {
		t.Errorf("no notice in the log:\n%s", at.out.String())
	}
	if !strings.Contains(at.out.String(), "fail-on-dlq") {
		t.Error("no fail-on-dlq error")
	}
}

func TestActionModeBadInputsExitTwo(t *testing.T) {
	t.Parallel()
	gh := newFakeGitHub(t)
	repo := cliRepo(t, map[string]string{"workflow.yml": actionWorkflow, "items.json": actionItems})
	tests := map[string]map[string]string{
		"bad comment":            {"INPUT_COMMENT": "sometimes"},
		"missing workflow":       {"INPUT_WORKFLOW": "nope.yml"},
		"retry without run":      {"INPUT_COMMAND": "retry"},
		"retry without workflow": {"INPUT_COMMAND": "retry", "INPUT_RETRY-FROM-RUN": "555", "INPUT_WORKFLOW": ""},
		"bad comment key":        {"INPUT_COMMENT-KEY": "a\u202eb"},
		"bad allow-fork":         {"INPUT_ALLOW-FORK-ARTIFACTS": "yes"},
		"bad permission mode":    {"INPUT_CLAUDE-PERMISSION-MODE": "yolo"},
		"bad tool rule":          {"INPUT_CLAUDE-ALLOWED-TOOLS": "-rf"},
	}
	for name, in := range tests {
		t.Run(name, func(t *testing.T) {
			at := newActionTest(t, gh, repo, in)
			if code := at.run(t); code != exitUsage {
				t.Fatalf("exit %d, want 2\n%s", code, at.out.String())
			}
			if !strings.Contains(at.out.String(), "::error::") {
				t.Errorf("no error annotation:\n%s", at.out.String())
			}
		})
	}
}

// An original pull_request run posts the sticky comment and uploads its
// DLQ; redrive.yml (another workflow and job, workflow_dispatch, no
// pr-number input) finds the PR and the comment key in the artifact,
// PATCHes the same comment with the run history, and the record's failure
// history continues.
func TestActionModeRedriveKeepsHistory(t *testing.T) {
	t.Parallel()
	gh := newFakeGitHub(t)
	gh.runID = 555
	repo := cliRepo(t, map[string]string{"workflow.yml": actionWorkflow, "items.json": actionItems})
	first := newActionTest(t, gh, repo, nil)
	if code := first.run(t); code != exitOK {
		t.Fatalf("first run: exit %d\n%s\n%s", code, first.out.String(), first.errb.String())
	}
	jobID := first.outputs(t)["job-id"]
	if len(gh.comments) != 1 {
		t.Fatalf("original run posted %d comments", len(gh.comments))
	}
	// The next run is a fresh container: new runner temp (state dir).
	gh.runID = 777
	redrive := newActionTest(t, gh, repo, map[string]string{
		"INPUT_COMMAND": "retry", "INPUT_RETRY-FROM-RUN": "555",
		"GITHUB_RUN_ID": "777", "GITHUB_EVENT_NAME": "workflow_dispatch", "GITHUB_JOB": "redrive", "GITHUB_WORKFLOW": "redrive",
		"GITHUB_WORKFLOW_REF": "o/r/.github/workflows/redrive.yml@refs/heads/main",
	})
	code := redrive.run(t)
	if code != exitOK {
		t.Fatalf("redrive: exit %d\nstdout:\n%s\nstderr:\n%s", code, redrive.out.String(), redrive.errb.String())
	}
	out := redrive.outputs(t)
	if out["job-id"] == jobID || out["dlq-count"] != "1" || out["total"] != "1" || out["dlq-artifact-name"] != "prodigy-dlq-777-1" {
		t.Fatalf("outputs = %v", out)
	}
	files := gh.unzipped(t, "prodigy-dlq-777-1")
	var arr []map[string]any
	if err := json.Unmarshal([]byte(files["dlq.json"]), &arr); err != nil || len(arr) != 1 {
		t.Fatalf("redrive dlq.json: %v", err)
	}
	// 2 attempts in the first run + 3 (the redrive default) = 5: history kept across runs.
	if got := arr[0]["failure_count"]; got != float64(5) {
		t.Errorf("failure_count after redrive = %v, want 5", got)
	}
	if !strings.Contains(redrive.file(t, "GITHUB_STEP_SUMMARY"), "redrive") {
		t.Error("summary does not say redrive")
	}
	if len(gh.comments) != 1 || gh.patches != 1 {
		t.Fatalf("comments %d, patches %d; want the original comment edited", len(gh.comments), gh.patches)
	}
	body := gh.comments[0]["body"].(string)
	for _, want := range []string{
		"<!-- prodigy-action:sticky-comment key=example.yml / fanout -->",
		"- run [run 555](https://github.com/o/r/actions/runs/555) (attempt 1, ",
		"): 3 item(s), 2 merged, 1 failed",
		"- redrive [run 777](https://github.com/o/r/actions/runs/777) (attempt 1, ",
		"): 1 item(s), 0 merged, 1 failed",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("comment lacks %q:\n%s", want, body)
		}
	}
	var meta artifactMeta
	if err := json.Unmarshal([]byte(files["meta.json"]), &meta); err != nil || meta.CommentKey != "example.yml / fanout" || len(meta.History) != 2 || meta.PRNumber != 7 {
		t.Errorf("redrive meta.json = %s (%v)", files["meta.json"], err)
	}

	// A second redrive (of the redrive's artifact) edits the same comment again.
	gh.runID = 888
	again := newActionTest(t, gh, repo, map[string]string{
		"INPUT_COMMAND": "retry", "INPUT_RETRY-FROM-RUN": "777",
		"GITHUB_RUN_ID": "888", "GITHUB_EVENT_NAME": "workflow_dispatch", "GITHUB_JOB": "redrive", "GITHUB_WORKFLOW": "redrive",
		"GITHUB_WORKFLOW_REF": "o/r/.github/workflows/redrive.yml@refs/heads/main",
	})
	if code := again.run(t); code != exitOK {
		t.Fatalf("second redrive: exit %d\n%s", code, again.out.String())
	}
	if len(gh.comments) != 1 || gh.patches != 2 || !strings.Contains(gh.comments[0]["body"].(string), "[run 888]") {
		t.Errorf("comments %d, patches %d:\n%s", len(gh.comments), gh.patches, gh.comments[0]["body"])
	}
}

func TestScrubEnv(t *testing.T) {
	t.Parallel()
	got := scrubEnv([]string{"PATH=/bin", "ACTIONS_RUNTIME_TOKEN=x", "INPUT_GITHUB-TOKEN=y", "INPUT_WORKFLOW=w", "ACTIONS_ID_TOKEN_REQUEST_TOKEN=z",
		"GITHUB_OUTPUT=/o", "GITHUB_ENV=/e", "GITHUB_PATH=/p", "GITHUB_STATE=/s", "GITHUB_STEP_SUMMARY=/m"})
	if strings.Join(got, " ") != "PATH=/bin INPUT_WORKFLOW=w" {
		t.Errorf("scrubEnv = %v", got)
	}
}

func keys(m map[string]string) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

// hostileWorkflow's agents print workflow commands and secrets from their
// environment; item "b" fails.
const hostileWorkflow = `name: hostile
mode: mapreduce
secrets: [DEPLOY_HOOK]
setup:
  - shell: |
      echo "##[error]pwned setup legacy $API_SECRET"
      echo "::warning::pwned setup"
map:
  input: items.json
  json_path: "$.items[*]"
  agent_template:
    - shell: |
        echo "::error::pwned annotation"
        echo "  ::warning file=x.go,line=1::pwned warning"
        echo "::set-output name=dlq-count::pwned"
        echo "::add-mask::pwned-mask"
        echo "::group::pwned group"
        echo "::endgroup::"
        echo "prefix ##[error]pwned legacy"
        echo "::stop-commands::x"
        echo "::error::pwned inside a fake stop"
        echo "::x::"
        echo "::notice::pwned after a fake resume"
        echo "pushing with $GH_PAT and key=$API_SECRET extra=$EXTRA_VAL hook=$DEPLOY_HOOK"
        echo "::error::pwned on stderr $API_SECRET" >&2
        if [ "${item.name}" = b ]; then exit 3; fi
`

// TestActionModeHostileOutput runs agents that print workflow commands and
// secrets. Read as the runner reads it, stdout holds only the Action's own
// commands (masks, item groups, annotations, which still work after the
// echoed output), stderr holds none; no secret reaches stdout (outside
// masks), stderr, GITHUB_OUTPUT, the summary, the PR comment, the artifact
// or any file under the state directory.
func TestActionModeHostileOutput(t *testing.T) {
	// t.Setenv: agents get the process environment.
	t.Setenv("GH_PAT", testGHP)
	t.Setenv("API_SECRET", testAPISecret)
	t.Setenv("DEPLOY_HOOK", "https://hooks.example/deploy-0123")
	t.Setenv("EXTRA_VAL", "declared-by-input-77")
	gh := newFakeGitHub(t)
	gh.runID = 555
	repo := cliRepo(t, map[string]string{"workflow.yml": hostileWorkflow, "items.json": `{"items":[{"name":"a"},{"name":"b"}]}`})
	at := newActionTest(t, gh, repo, map[string]string{"INPUT_SECRET-VALUES": "\n  declared-by-input-77  \n"})
	if code := at.run(t); code != exitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, at.out.String(), at.errb.String())
	}
	stdout, stderr := at.out.String(), at.errb.String()
	if !strings.Contains(stdout, "::error::pwned annotation") || !strings.Contains(stdout, "pushing with ***") {
		t.Fatalf("the agents' output was not echoed:\n%s", stdout)
	}

	var ours []string
	errorLine, firstEchoEnd := 0, 0
	for i, line := range strings.Split(stdout, "\n") {
		if strings.HasPrefix(line, "::prodigy-") && firstEchoEnd == 0 {
			firstEchoEnd = i + 1 // the line that enables commands again
		}
	}
	for _, c := range ghactiontest.Parse(stdout) {
		switch {
		case c.Name == "error" && c.Props["title"] == "item item_1":
			// Ours: the item's error message (agent text, escaped by
			// go-githubactions) is its data.
			errorLine = c.Line
			ours = append(ours, "error "+c.Props["title"])
			continue
		case strings.Contains(c.Data, "pwned") || strings.Contains(fmt.Sprint(c.Props), "pwned"):
			t.Errorf("line %d: agent command %s %v %q was processed", c.Line, c.Name, c.Props, c.Data)
		case c.Name == "add-mask":
			continue
		}
		ours = append(ours, c.Name+" "+c.Props["title"]+":"+strings.SplitN(c.Data, " (", 2)[0])
	}
	slices.Sort(ours)
	want := []string{"endgroup :", "endgroup :", "error item item_1", "group :item item_0: merged", "group :item item_1: dlq",
		"notice :DLQ artifact prodigy-dlq-555-1 uploaded"}
	if strings.Join(ours, "\n") != strings.Join(want, "\n") {
		t.Errorf("processed commands:\n%s\nwant:\n%s\nstdout:\n%s", strings.Join(ours, "\n"), strings.Join(want, "\n"), stdout)
	}
	if firstEchoEnd == 0 || errorLine < firstEchoEnd {
		t.Errorf("our annotation (line %d) is not after echoed output (ending on line %d)", errorLine, firstEchoEnd)
	}
	if cmds := ghactiontest.Parse(stderr); len(cmds) != 0 {
		t.Errorf("stderr carries commands %v:\n%s", cmds, stderr)
	}
	if out := at.file(t, "GITHUB_OUTPUT"); strings.Contains(out, "pwned") {
		t.Errorf("GITHUB_OUTPUT holds agent output:\n%s", out)
	}

	// Secrets: masked for the runner, redacted everywhere.
	var masks []string
	var rest strings.Builder
	for _, line := range strings.Split(stdout, "\n") {
		if m, ok := strings.CutPrefix(line, "::add-mask::"); ok {
			masks = append(masks, m)
			continue
		}
		rest.WriteString(line + "\n")
	}
	for _, m := range []string{testToken, testAPISecret, "declared-by-input-77"} {
		if !slices.Contains(masks, m) {
			t.Errorf("%q not masked (masks %q)", m, masks)
		}
	}
	extra := []string{"declared-by-input-77", "https://hooks.example/deploy-0123", testToken}
	check := func(where, text string) {
		t.Helper()
		assertNoSecrets(t, where, text)
		for _, s := range extra {
			if strings.Contains(text, s) {
				t.Errorf("%s holds %q", where, s)
			}
		}
	}
	check("stdout", rest.String())
	check("stderr", stderr)
	check("summary", at.file(t, "GITHUB_STEP_SUMMARY"))
	check("outputs", at.file(t, "GITHUB_OUTPUT"))
	if len(gh.comments) != 1 {
		t.Fatalf("comments = %d", len(gh.comments))
	}
	check("comment", gh.comments[0]["body"].(string))
	files := gh.unzipped(t, "prodigy-dlq-555-1")
	if !strings.Contains(files["items/item_1.json"], "pushing with ***") {
		t.Errorf("the record lost the failing step's output:\n%s", files["items/item_1.json"])
	}
	for name, content := range files {
		check("artifact "+name, content)
	}
	state := filepath.Join(at.env["RUNNER_TEMP"], "prodigy")
	if n := assertNoSecretFiles(t, state); n < 5 {
		t.Errorf("only %d files under %s", n, state)
	}
	_ = filepath.WalkDir(state, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && !strings.Contains(p, "/worktrees/") {
			b, _ := os.ReadFile(p)
			check(p, string(b))
		}
		return nil
	})
}

// TestRedactReportBeforeEscaping: escaping turns ghp_… into ghp\_…, which
// no redactor of the rendered markdown recognises; the report's text is
// redacted before rendering.
func TestRedactReportBeforeEscaping(t *testing.T) {
	t.Parallel()
	in := report.Input{JobID: "j", Status: "completed", DLQCount: 1, Error: "job failed: " + testGHP,
		FailedItems: []report.FailedItem{{ItemID: "item_1", ErrorType: "CommandFailed", Attempts: 1, LastError: "push " + testGHP + " key_" + testAPISecret}}}
	red := redact.New(redact.Config{Values: []string{"key_" + testAPISecret}})
	if raw := red.String(report.Summary(in)); !strings.Contains(raw, `ghp\_`) {
		t.Fatalf("escaping no longer hides the token shape; the test proves nothing:\n%s", raw)
	}
	got := redactReport(red, in)
	for name, text := range map[string]string{"summary": report.Summary(got), "comment": report.Comment(got)} {
		if strings.Contains(text, "ghp") || strings.Contains(text, "secret") {
			t.Errorf("%s leaks:\n%s", name, text)
		}
	}
	if got.FailedItems[0].ItemID != "item_1" || got.DLQCount != 1 {
		t.Errorf("redactReport lost data: %+v", got)
	}
}

// recordingEngine records the engine the Action built and wraps it to
// record what it runs with.
func (at *actionTest) recordingEngine(e *runner.Engine) Engine {
	at.engine = e
	return recordingEngine{at: at, e: e}
}

// recordingEngine runs the real engine and records the specs it got.
type recordingEngine struct {
	at *actionTest
	e  *runner.Engine
}

func (r recordingEngine) Run(ctx context.Context, s runner.RunSpec) (*runner.Result, error) {
	r.at.runSpec = &s
	return r.e.Run(ctx, s)
}

func (r recordingEngine) Redrive(ctx context.Context, s runner.RedriveSpec) (*runner.Result, error) {
	r.at.retry = s
	return r.e.Redrive(ctx, s)
}
