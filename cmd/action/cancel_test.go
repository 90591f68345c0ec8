//go:build linux

package main

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prodigy-action/prodigy-action/ghaction"
	"github.com/prodigy-action/prodigy-action/internal/proctest"
)

// GitHub's cancel sequence for a step's process (the runner's
// ProcessInvoker): SIGINT, SIGTERM 7.5 s later, SIGKILL 2.5 s after that.
const (
	githubSigtermAfter = 7500 * time.Millisecond
	githubSigkillAfter = 10 * time.Second
)

// cancelGitHub is the part of GitHub a cancelled Action still talks to:
// the artifact service (twirp + blob storage) and the issue comments.
type cancelGitHub struct {
	srv      *httptest.Server
	arts     artifactService
	mu       sync.Mutex
	comments []string
}

func newCancelGitHub(t *testing.T) *cancelGitHub {
	g := &cancelGitHub{}
	mux := http.NewServeMux()
	g.arts.register(mux, func() string { return g.srv.URL })
	mux.HandleFunc("/api/user", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusForbidden) })
	mux.HandleFunc("/api/repos/o/r/issues/7/comments", func(w http.ResponseWriter, r *http.Request) {
		g.mu.Lock()
		defer g.mu.Unlock()
		if r.Method == http.MethodGet {
			_, _ = io.WriteString(w, "[]")
			return
		}
		var in struct{ Body string }
		_ = json.NewDecoder(r.Body).Decode(&in)
		g.comments = append(g.comments, in.Body)
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(map[string]any{"id": 1, "body": in.Body, "user": map[string]any{"login": "github-actions[bot]", "type": "Bot"}})
	})
	g.srv = httptest.NewServer(mux)
	t.Cleanup(g.srv.Close)
	return g
}

// cancelRun is one Action process on a runner-style workspace (owned by
// uid 1001, the container running as root).
type cancelRun struct {
	cmd                        *exec.Cmd
	stderr, stdout             syncedBuffer
	ws, temp, pidDir, out, sum string
	gh                         *cancelGitHub
}

// startCancelRun starts the Action (the real binary, Action mode) on a
// workflow of four items: item_0 succeeds, item_1 fails into the DLQ, and
// item_2 and item_3 run agents that ignore SIGTERM and would take 30 s.
func startCancelRun(t *testing.T) *cancelRun {
	t.Helper()
	c := &cancelRun{pidDir: t.TempDir(), temp: t.TempDir(), gh: newCancelGitHub(t)}
	wf := fmt.Sprintf(`
name: cancel
mode: mapreduce
map:
  input: items.json
  max_parallel: 4
  agent_template:
    - shell: |
        case "${item.n}" in
          0) echo done > out-0.txt && git add out-0.txt && git commit -qm "do 0" ;;
          1) echo "cannot do 1" >&2; exit 3 ;;
          *) trap '' TERM
             sleep 30 </dev/null >/dev/null 2>&1 &
             echo "$$ $!" > %[1]q/$$.tmp && mv %[1]q/$$.tmp %[1]q/$$.pids
             wait ;;
        esac
  error_policy:
    on_item_failure: dlq
    retry_config:
      attempts: 1
`, c.pidDir)
	c.ws = cliRepo(t, map[string]string{"workflow.yml": wf, "items.json": `[{"n":0},{"n":1},{"n":2},{"n":3}]`})
	// The runner's workspace belongs to the runner user; the container is root.
	if err := ghaction.RestoreOwnership(c.ws, 1001, 1001); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(c.temp, 1001, 1001); err != nil {
		t.Fatal(err)
	}
	event := filepath.Join(t.TempDir(), "event.json")
	if err := os.WriteFile(event, []byte(`{"number": 7, "pull_request": {"number": 7, "head": {"ref": "feature"}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	c.out, c.sum = filepath.Join(t.TempDir(), "output"), filepath.Join(t.TempDir(), "summary")
	enc := base64.RawURLEncoding
	runtimeToken := enc.EncodeToString([]byte(`{"alg":"none"}`)) + "." + enc.EncodeToString([]byte(`{"scp":"Actions.Results:run-b:job-b"}`)) + ".sig"
	c.cmd = exec.Command(os.Args[0])
	c.cmd.Env = []string{
		"PRODIGY_ACTION_TEST_MAIN=1", "PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(),
		"GITHUB_ACTIONS=true", "CI=true", "GITHUB_WORKSPACE=" + c.ws, "RUNNER_TEMP=" + c.temp,
		"GITHUB_OUTPUT=" + c.out, "GITHUB_STEP_SUMMARY=" + c.sum,
		"GITHUB_EVENT_PATH=" + event, "GITHUB_EVENT_NAME=pull_request",
		"GITHUB_REPOSITORY=o/r", "GITHUB_REPOSITORY_OWNER=o", "GITHUB_RUN_ID=77", "GITHUB_RUN_ATTEMPT=1",
		"GITHUB_WORKFLOW=ci", "GITHUB_JOB=fanout", "GITHUB_WORKFLOW_REF=o/r/.github/workflows/ci.yml@refs/pull/7/merge",
		"GITHUB_API_URL=" + c.gh.srv.URL + "/api", "GITHUB_SERVER_URL=https://github.com",
		"ACTIONS_RUNTIME_TOKEN=" + runtimeToken, "ACTIONS_RESULTS_URL=" + c.gh.srv.URL + "/",
		"INPUT_WORKFLOW=workflow.yml", "INPUT_COMMAND=run", "INPUT_GITHUB-TOKEN=tok", "INPUT_COMMENT=always",
		"INPUT_ARTIFACT-NAME=prodigy-dlq",
	}
	c.cmd.Stdout, c.cmd.Stderr = &c.stdout, &c.stderr
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.cmd.Process.Kill() })
	return c
}

// waitUntilBusy waits until item_0 is merged, item_1 is in the DLQ and
// both long agents run; it returns the long agents' pids.
func (c *cancelRun) waitUntilBusy(t *testing.T) []int {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		events, _ := filepath.Glob(filepath.Join(c.temp, "prodigy", "events", "*", "*", "events.jsonl"))
		pidFiles, _ := filepath.Glob(filepath.Join(c.pidDir, "*.pids"))
		var log []byte
		if len(events) == 1 {
			log, _ = os.ReadFile(events[0])
		}
		if len(pidFiles) == 2 && strings.Contains(string(log), `"worktree_merged"`) && strings.Contains(string(log), `"dlq_item_added"`) {
			var pids []int
			for _, f := range pidFiles {
				data, _ := os.ReadFile(f)
				for _, s := range strings.Fields(string(data)) {
					if n, err := strconv.Atoi(s); err == nil {
						pids = append(pids, n)
					}
				}
			}
			return pids
		}
		if time.Now().After(deadline) {
			t.Fatalf("the run never got busy:\n%s", c.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// check verifies what a cancelled run must leave: exit 130 by itself,
// item_0 published as merged and item_1 in the uploaded DLQ artifact,
// outputs, summary and comment written, the agents gone and every path
// under the workspace and RUNNER_TEMP owned by the runner's uid again.
func (c *cancelRun) check(t *testing.T, err error, pids []int) {
	t.Helper()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 130 {
		t.Fatalf("exit = %v, want 130 (interrupted, resumable)\nstderr:\n%s", err, c.stderr.String())
	}
	raw, _ := os.ReadFile(c.out)
	out := string(raw)
	for _, want := range []string{"total<<", "successful<<", "dlq-count<<", "dlq-artifact-name<<"} {
		if !strings.Contains(out, want) {
			t.Errorf("output %s not written:\n%s", strings.TrimSuffix(want, "<<"), out)
		}
	}
	for _, want := range []string{"\n1\n", "prodigy-dlq-77-1"} {
		if !strings.Contains(out, want) {
			t.Errorf("outputs lack %q:\n%s", want, out)
		}
	}
	if sum, _ := os.ReadFile(c.sum); !strings.Contains(string(sum), `item\_1`) {
		t.Errorf("job summary does not list the DLQ item:\n%s", sum)
	}
	c.gh.arts.mu.Lock()
	if len(c.gh.arts.order) != 1 || len(c.gh.arts.final[c.gh.arts.order[0]]) == 0 {
		t.Errorf("DLQ artifact not uploaded: %v", c.gh.arts.order)
	}
	c.gh.arts.mu.Unlock()
	c.gh.mu.Lock()
	if len(c.gh.comments) != 1 {
		t.Errorf("comments = %d, want 1", len(c.gh.comments))
	}
	c.gh.mu.Unlock()
	for _, pid := range pids {
		if !proctest.Gone(pid) {
			t.Errorf("agent process %d outlived the Action", pid)
		}
	}
	for _, root := range []string{c.ws, c.temp} {
		var rootOwned []string
		_ = filepath.WalkDir(root, func(p string, _ fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			if uid, _, err := ghaction.Owner(p); err == nil && uid != 1001 {
				rootOwned = append(rootOwned, p)
			}
			return nil
		})
		if len(rootOwned) > 0 {
			t.Errorf("%d path(s) not handed back to uid 1001, e.g. %s", len(rootOwned), rootOwned[0])
		}
	}
	// The results branch is not left checked out in a worktree of the
	// job's discarded state: a later step can delete it (checked last: this
	// git runs as root).
	branch := ""
	if _, rest, ok := strings.Cut(out, "results-branch<<"); ok {
		if lines := strings.SplitN(rest, "\n", 3); len(lines) >= 2 {
			branch = lines[1]
		}
	}
	if branch == "" {
		t.Errorf("no results-branch output:\n%s", out)
	} else {
		gitOut(t, c.ws, "-c", "safe.directory=*", "branch", "-D", branch)
	}
}

// TestActionCancelFitsGitHubsSignalSequence cancels a running Action as
// GitHub does (SIGINT; SIGTERM 7.5 s later; SIGKILL 2.5 s after that)
// while two agents that ignore SIGTERM have 30 s to go. The Action must end
// by itself before GitHub's SIGTERM with everything that finished
// published and the workspace handed back.
func TestActionCancelFitsGitHubsSignalSequence(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns the Action and signals it")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root: the workspace belongs to uid 1001 as on GitHub's runners")
	}
	t.Parallel()
	c := startCancelRun(t)
	pids := c.waitUntilBusy(t)
	done := make(chan error, 1)
	go func() { done <- c.cmd.Wait() }()
	start := time.Now()
	if err := c.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	var err error
	select {
	case err = <-done:
	case <-time.After(githubSigtermAfter):
		_ = c.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err = <-done:
		case <-time.After(githubSigkillAfter - githubSigtermAfter):
			_ = c.cmd.Process.Kill()
			<-done
			t.Fatalf("still running %s after SIGINT: GitHub would have killed it\n%s", githubSigkillAfter, c.stderr.String())
		}
		t.Errorf("still running when GitHub sends SIGTERM (%s after SIGINT)", githubSigtermAfter)
	}
	t.Logf("SIGINT to exit: %s", time.Since(start))
	if !strings.Contains(c.stderr.String(), "running agents are stopped (SIGTERM, SIGKILL 2s later)") {
		t.Errorf("the log does not say the agents are stopped at once:\n%s", c.stderr.String())
	}
	c.check(t, err, pids)
}

// TestActionLaterSignalsDoNotInterruptPublishing sends GitHub's signals
// back to back (SIGINT, SIGTERM, SIGINT 100 ms apart): the later ones must
// change nothing, where the command line would abort at the second.
func TestActionLaterSignalsDoNotInterruptPublishing(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns the Action and signals it")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root: the workspace belongs to uid 1001 as on GitHub's runners")
	}
	t.Parallel()
	c := startCancelRun(t)
	pids := c.waitUntilBusy(t)
	for _, sig := range []os.Signal{os.Interrupt, syscall.SIGTERM, os.Interrupt} {
		if err := c.cmd.Process.Signal(sig); err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	err := c.cmd.Wait()
	if !strings.Contains(c.stderr.String(), "signal terminated ignored") {
		t.Errorf("the later SIGTERM was not noted:\n%s", c.stderr.String())
	}
	c.check(t, err, pids)
}
