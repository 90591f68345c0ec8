//go:build linux

package main

import (
	"archive/zip"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prodigy-action/prodigy-action/cli/clitest"
)

// artifactService is the v4 artifact service as a shard's live uploads
// meet it: Create (409 for a finalized name), Put Block/Put Block List,
// Finalize and Delete (404 for a missing name).
type artifactService struct {
	srv     *httptest.Server
	mu      sync.Mutex
	pending map[string][]byte
	final   map[string][]byte
	order   []string // finalized names in order
	deleted []string
}

func newArtifactService(t *testing.T) *artifactService {
	a := &artifactService{}
	mux := http.NewServeMux()
	a.register(mux, func() string { return a.srv.URL })
	a.srv = httptest.NewServer(mux)
	t.Cleanup(a.srv.Close)
	return a
}

// register serves the artifact service's routes on mux; base is the
// server's URL (for the signed upload URLs).
func (a *artifactService) register(mux *http.ServeMux, base func() string) {
	a.pending, a.final = map[string][]byte{}, map[string][]byte{}
	mux.HandleFunc("/twirp/github.actions.results.api.v1.ArtifactService/", func(w http.ResponseWriter, r *http.Request) {
		var req struct{ Name string }
		_ = json.NewDecoder(r.Body).Decode(&req)
		a.mu.Lock()
		defer a.mu.Unlock()
		switch strings.TrimPrefix(r.URL.Path, "/twirp/github.actions.results.api.v1.ArtifactService/") {
		case "CreateArtifact":
			if _, dup := a.final[req.Name]; dup {
				w.WriteHeader(http.StatusConflict)
				_, _ = io.WriteString(w, `{"code":"already_exists","msg":"Conflict: an artifact with this name already exists on the workflow run"}`)
				return
			}
			a.pending[req.Name] = nil
			_ = json.NewEncoder(w).Encode(map[string]any{"ok": true, "signed_upload_url": base() + "/blob/" + req.Name + "?sig=s"})
		case "FinalizeArtifact":
			a.final[req.Name] = a.pending[req.Name]
			a.order = append(a.order, req.Name)
			_ = json.NewEncoder(w).Encode(map[string]any{"ok": true, "artifact_id": strconv.Itoa(len(a.order))})
		case "DeleteArtifact":
			if _, ok := a.final[req.Name]; !ok {
				w.WriteHeader(http.StatusNotFound)
				_, _ = io.WriteString(w, `{"code":"not_found","msg":"artifact not found"}`)
				return
			}
			delete(a.final, req.Name)
			a.deleted = append(a.deleted, req.Name)
			_ = json.NewEncoder(w).Encode(map[string]any{"ok": true, "artifact_id": "1"})
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	})
	mux.HandleFunc("/blob/", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		a.mu.Lock()
		defer a.mu.Unlock()
		if r.URL.Query().Get("comp") == "block" {
			name := strings.TrimPrefix(r.URL.Path, "/blob/")
			a.pending[name] = append(a.pending[name], b...)
		}
		w.WriteHeader(http.StatusCreated)
	})
}

// newest returns the last finalized artifact still present.
func (a *artifactService) newest() (string, []byte) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for i := len(a.order) - 1; i >= 0; i-- {
		if b, ok := a.final[a.order[i]]; ok {
			return a.order[i], b
		}
	}
	return "", nil
}

// unzipTo extracts an artifact zip into dir, as actions/download-artifact does.
func unzipTo(t *testing.T, data []byte, dir string) {
	t.Helper()
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	for _, zf := range zr.File {
		p := filepath.Join(dir, filepath.FromSlash(zf.Name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		rc, err := zf.Open()
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// shardStates reads an output zip's result.json: item states and run_attempt.
func shardStates(data []byte) (map[string]string, int) {
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return nil, 0
	}
	for _, zf := range zr.File {
		if zf.Name != "result.json" {
			continue
		}
		rc, err := zf.Open()
		if err != nil {
			return nil, 0
		}
		var sr struct {
			RunAttempt int `json:"run_attempt"`
			Items      []struct {
				ItemID string `json:"item_id"`
				State  string `json:"state"`
			} `json:"items"`
		}
		err = json.NewDecoder(rc).Decode(&sr)
		rc.Close()
		if err != nil {
			return nil, 0
		}
		states := map[string]string{}
		for _, it := range sr.Items {
			states[it.ItemID] = it.State
		}
		return states, sr.RunAttempt
	}
	return nil, 0
}

// actionShard is the Action running `command: shard` on workspace ws as
// a runner runs it, with live uploads to svc every second.
func actionShard(t *testing.T, svc *artifactService, ws, planDir, out, prev string, attempt int) *exec.Cmd {
	enc := base64.RawURLEncoding
	token := enc.EncodeToString([]byte(`{"alg":"none"}`)) + "." + enc.EncodeToString([]byte(`{"scp":"Actions.Results:run-v:job-v"}`)) + ".sig"
	cmd := exec.Command(os.Args[0])
	cmd.Env = []string{
		"PRODIGY_ACTION_TEST_MAIN=1", "PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(),
		"GITHUB_ACTIONS=true", "CI=true", "GITHUB_WORKSPACE=" + ws, "RUNNER_TEMP=" + t.TempDir(),
		"GITHUB_OUTPUT=" + filepath.Join(t.TempDir(), "output"), "GITHUB_STEP_SUMMARY=" + filepath.Join(t.TempDir(), "summary"),
		"GITHUB_EVENT_NAME=workflow_dispatch", "GITHUB_REPOSITORY=o/r", "GITHUB_REPOSITORY_OWNER=o",
		"GITHUB_RUN_ID=88", "GITHUB_RUN_ATTEMPT=" + strconv.Itoa(attempt), "GITHUB_WORKFLOW=fanout", "GITHUB_JOB=shard",
		"GITHUB_API_URL=" + svc.srv.URL + "/api", "GITHUB_SERVER_URL=https://github.com",
		"ACTIONS_RUNTIME_TOKEN=" + token, "ACTIONS_RESULTS_URL=" + svc.srv.URL + "/",
		"INPUT_COMMAND=shard", "INPUT_SHARD=0", "INPUT_PLAN-DIR=" + planDir, "INPUT_SHARD-OUT=" + out,
		"INPUT_SHARD-CONTINUE=" + prev, "INPUT_LIVE-ARTIFACT=" + fmt.Sprintf("prodigy-shard-J-%d-live", attempt),
		"INPUT_LIVE-UPLOAD-INTERVAL=1s", "INPUT_COMMENT=never",
	}
	return cmd
}

// TestVanishedShardRunnerLosesOnlyItsItemsInFlight: a shard's runner
// vanishes (the Action and everything on the machine SIGKILLed, its disk
// gone: no `if: always()` upload runs). What it had finished is in the
// run's artifacts all the same, because the Action uploads the shard's
// output while it runs (live-artifact, every live-upload-interval, the
// previous snapshot deleted once the next is finalized). A re-run on a
// new machine continues from the newest snapshot (shard-continue, as
// fanout.yml downloads it): only the items that were in flight or never
// started run again, and gathering the re-run's output completes the job.
func TestVanishedShardRunnerLosesOnlyItsItemsInFlight(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns the Action and kills it")
	}
	t.Parallel()
	pidDir := t.TempDir()
	origin, planDir := killableShardJob(t, pidDir)
	svc := newArtifactService(t)
	cmd := actionShard(t, svc, clitest.Clone(t, origin, "runner1"), planDir, filepath.Join(t.TempDir(), "out"), "", 1)
	var stderr syncedBuffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); killLongAgent(pidDir) })
	// Wait until an uploaded snapshot has item_2 merged and item_1 failed
	// (item_3 runs, item_4 never starts: max_parallel 1).
	deadline := time.Now().Add(2 * time.Minute)
	var name string
	var data []byte
	for {
		name, data = svc.newest()
		if states, _ := shardStates(data); states["item_2"] == "merged" && states["item_1"] == "dlq" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no uploaded snapshot with item_2 merged (newest %q):\n%s", name, stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The machine is gone: the Action, its agents, its disk.
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	killLongAgent(pidDir)

	svc.mu.Lock()
	live := len(svc.final)
	uploads, deleted := len(svc.order), len(svc.deleted)
	svc.mu.Unlock()
	t.Logf("%d upload(s), %d deleted, %d left", uploads, deleted, live)
	if live < 1 || live > 2 {
		t.Errorf("%d snapshot(s) left, want 1 (2 when killed between an upload and the delete of the one before)", live)
	}
	if uploads > 1 && deleted < uploads-2 {
		t.Errorf("%d upload(s) but %d deleted: earlier snapshots pile up", uploads, deleted)
	}
	if !strings.HasPrefix(name, "prodigy-shard-J-1-live") || !strings.HasSuffix(name, "-0") {
		t.Errorf("snapshot name %q, want prodigy-shard-J-1-live<n>-0 (fanout.yml's download pattern ends in the shard)", name)
	}

	// The re-run on a new machine downloads every earlier artifact of the
	// shard (as fanout.yml does) and continues from the newest.
	prev := t.TempDir()
	svc.mu.Lock()
	var names []string
	for n := range svc.final {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		unzipTo(t, svc.final[n], filepath.Join(prev, n))
	}
	svc.mu.Unlock()
	if err := os.WriteFile(filepath.Join(pidDir, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	out2 := filepath.Join(t.TempDir(), "out2")
	rerun := actionShard(t, svc, clitest.Clone(t, origin, "runner2"), planDir, out2, prev, 2)
	var stderr2 syncedBuffer
	rerun.Stdout, rerun.Stderr = &stderr2, &stderr2
	if err := rerun.Run(); err != nil {
		t.Fatalf("re-run: %v\n%s", err, stderr2.String())
	}
	runs, _ := os.ReadFile(filepath.Join(pidDir, "runs"))
	if got := strings.Fields(string(runs)); strings.Join(got, " ") != "0 1 2 3 4" {
		t.Errorf("items run (in order, over both attempts) = %v, want each once: 0 1 2 3 4\n%s", got, stderr2.String())
	}
	// The re-run's own live uploads carry its attempt.
	if _, data := svc.newest(); data != nil {
		if _, attempt := shardStates(data); attempt != 2 {
			t.Errorf("the re-run's snapshot has run_attempt %d, want 2", attempt)
		}
	}
	code, stdout, gerr := runCLI(t, t.TempDir(), "gather", planDir, out2, "--repo", clitest.Clone(t, origin, "gather"), "--json")
	if code != 0 {
		t.Fatalf("gather: exit %d\n%s\n%s", code, stdout, gerr)
	}
	var res struct{ Successful, Failed, Pending int }
	if err := json.Unmarshal([]byte(stdout), &res); err != nil || res.Successful != 4 || res.Failed != 1 || res.Pending != 0 {
		t.Errorf("gathered %+v (%v), want 4 merged, 1 failed", res, err)
	}
}
