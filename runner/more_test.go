package runner_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prodigy-action/prodigy-action/runner"
)

// TestWorksWithoutGitIdentity simulates a fresh CI runner: no global or
// system git config, so neither agents' commits nor merges have an identity
// unless the runner provides one.
func TestWorksWithoutGitIdentity(t *testing.T) {
	// t.Setenv: not parallel.
	empty := filepath.Join(t.TempDir(), "empty-gitconfig")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GIT_CONFIG_GLOBAL", empty)
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	t.Setenv("GIT_AUTHOR_NAME", "")
	t.Setenv("GIT_AUTHOR_EMAIL", "")
	t.Setenv("GIT_COMMITTER_NAME", "")
	t.Setenv("GIT_COMMITTER_EMAIL", "")
	os.Unsetenv("GIT_AUTHOR_NAME")
	os.Unsetenv("GIT_AUTHOR_EMAIL")
	os.Unsetenv("GIT_COMMITTER_NAME")
	os.Unsetenv("GIT_COMMITTER_EMAIL")
	r := newTestRepo(t, map[string]string{"items.json": itemsJSON(3)})
	wf := r.Workflow(`
name: no-identity
mode: mapreduce
map:
  input: items.json
  max_parallel: 2
  agent_template:
    - shell: echo "${item.n}" > "f-${item.n}.txt" && git add . && git commit -qm "item ${item.n}"
`)
	for _, mode := range []runner.MergeMode{runner.MergeTree, runner.MergeWorktree} {
		o, _, stderr, _ := r.options(wf)
		o.JobID = "job-" + string(mode)
		o.Merge = mode
		res, err := r.run(o)
		if err != nil || res.Successful != 3 {
			t.Fatalf("%s: %v %+v\n%s", mode, err, res, stderr)
		}
		if who := r.Git("log", "-1", "--format=%an <%ae>", res.ResultsBranch); !strings.Contains(who, "prodigy-action[bot]") {
			t.Errorf("%s: merge author = %q", mode, who)
		}
	}
}

func TestResumeIncludeDLQRedrivesEligibleItems(t *testing.T) {
	t.Parallel()
	r := newTestRepo(t, map[string]string{"items.json": `[{"id": "a"}, {"id": "flaky"}]`})
	fixed := filepath.Join(t.TempDir(), "fixed")
	wf := r.Workflow(fmt.Sprintf(`
name: include-dlq
mode: mapreduce
map:
  input: items.json
  agent_template:
    - shell: |
        if [ "${item.id}" = flaky ] && [ ! -e %s ]; then echo "connection refused (network)" >&2; exit 1; fi
        echo "${item.id}" > "out-${item.id}.txt" && git add . && git commit -qm "${item.id}"
`, fixed))
	o, _, stderr, _ := r.options(wf)
	res, err := r.run(o)
	if err != nil || res.Failed != 1 {
		t.Fatalf("run: %v %+v\n%s", err, res, stderr)
	}
	if !r.DLQRecords("job-1")["item_1"].ReprocessEligible {
		t.Fatalf("a network failure should be eligible")
	}
	if err := os.WriteFile(fixed, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	o2, _, stderr2, _ := r.options(nil)
	res2, err := resumeJob(context.Background(), ResumeOptions{Home: r.Home, JobID: "job-1", IncludeDLQ: true, Run: o2})
	if err != nil {
		t.Fatalf("resume: %v\n%s", err, stderr2)
	}
	if res2.Successful != 2 || res2.DLQCount != 0 || res2.Total != 2 {
		t.Fatalf("resume --include-dlq result = %+v", res2)
	}
	if len(r.DLQRecords("job-1")) != 0 {
		t.Errorf("the redriven item is still in the DLQ")
	}
}

func TestRedriveInterruptedLosesNoRecordAndContinues(t *testing.T) {
	t.Parallel()
	r := newTestRepo(t, map[string]string{"items.json": itemsJSON(6)})
	fixed := filepath.Join(t.TempDir(), "fixed")
	wf := r.Workflow(fmt.Sprintf(`
name: redrive-interrupt
mode: mapreduce
map:
  input: items.json
  max_parallel: 3
  agent_template:
    - shell: |
        if [ ! -e %s ]; then echo "timed out waiting for service" >&2; exit 1; fi
        sleep 0.2
        echo "${item.n}" > "out-${item.n}.txt" && git add . && git commit -qm "${item.n}"
`, fixed))
	o, _, _, _ := r.options(wf)
	if res, err := r.run(o); err != nil || res.Failed != 6 {
		t.Fatalf("run: %v %+v", err, res)
	}
	if err := os.WriteFile(fixed, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	o2, _, _, hooks := r.options(nil)
	o2.InterruptGrace = 10 * time.Second
	hooks.OnItem = func(n int) {
		if n == 2 {
			cancel()
		}
	}
	res, err := retryDLQ(ctx, RetryOptions{Home: r.Home, JobID: "job-1", Parallel: 1, Run: o2})
	if !errors.Is(err, runner.ErrInterrupted) {
		t.Fatalf("err = %v, want interrupted (%+v)", err, res)
	}
	left := len(r.DLQRecords("job-1"))
	if left+res.Successful != 6 || left == 0 {
		t.Fatalf("after interruption: %d records + %d merged != 6", left, res.Successful)
	}
	o3, _, stderr3, _ := r.options(nil)
	res3, err := retryDLQ(context.Background(), RetryOptions{Home: r.Home, JobID: "job-1", Run: o3})
	if err != nil {
		t.Fatalf("second retry: %v\n%s", err, stderr3)
	}
	if res3.Successful != 6 || res3.DLQCount != 0 || len(r.DLQRecords("job-1")) != 0 {
		t.Fatalf("second retry result = %+v", res3)
	}
	if merges := r.Git("rev-list", "--merges", "--count", res3.ResultsBranch); merges != "6" {
		t.Errorf("%s merges, want 6", merges)
	}
}

func TestStopPolicyHaltsAndLeavesPending(t *testing.T) {
	t.Parallel()
	r := newTestRepo(t, map[string]string{"items.json": itemsJSON(10)})
	wf := r.Workflow(`
name: stop
mode: mapreduce
map:
  input: items.json
  max_parallel: 1
  agent_template:
    - shell: |
        if [ "${item.n}" = 2 ]; then exit 5; fi
        echo ok > "o-${item.n}" && git add . && git commit -qm ok
  error_policy:
    on_item_failure: stop
`)
	o, _, stderr, _ := r.options(wf)
	res, err := r.run(o)
	if !errors.Is(err, runner.ErrJobFailed) {
		t.Fatalf("err = %v\n%s", err, stderr)
	}
	if res.Status != runner.StatusFailed || res.Successful != 2 || res.Failed != 1 || res.Pending != 7 {
		t.Fatalf("result = %+v", res)
	}
}

func TestMaxFailuresAndSkipPolicies(t *testing.T) {
	t.Parallel()
	r := newTestRepo(t, map[string]string{"items.json": itemsJSON(8)})
	wf := r.Workflow(`
name: skip
mode: mapreduce
map:
  input: items.json
  max_parallel: 1
  agent_template:
    - shell: exit 1
  error_policy:
    on_item_failure: skip
    max_failures: 3
`)
	o, _, _, _ := r.options(wf)
	res, err := r.run(o)
	if !errors.Is(err, runner.ErrJobFailed) || res.Skipped != 3 || res.Pending != 5 || res.DLQCount != 0 {
		t.Fatalf("err %v result %+v", err, res)
	}
}

func TestPreserveFailedWorktree(t *testing.T) {
	t.Parallel()
	r := newTestRepo(t, map[string]string{"items.json": `[{"id": 1}]`})
	wf := r.Workflow(`
name: preserve
mode: mapreduce
preserve_failed_worktrees: true
map:
  input: items.json
  agent_template:
    - shell: echo partial > partial.txt && exit 9
`)
	o, _, _, _ := r.options(wf)
	res, err := r.run(o)
	if err != nil || res.Failed != 1 {
		t.Fatalf("%v %+v", err, res)
	}
	rec := r.DLQRecords("job-1")["item_0"]
	a := rec.WorktreeArtifacts
	if a == nil {
		t.Fatal("no artifacts")
	}
	if _, err := os.Stat(filepath.Join(a.WorktreePath, "partial.txt")); err != nil {
		t.Errorf("preserved worktree lacks the agent's file: %v", err)
	}
	if a.UncommittedChanges == nil || !strings.Contains(*a.UncommittedChanges, "partial.txt") {
		t.Errorf("uncommitted_changes = %v", a.UncommittedChanges)
	}
	if b := r.Git("branch", "--list", a.BranchName); b == "" {
		t.Errorf("preserved branch %s is gone", a.BranchName)
	}
}

// TestRedactKeepsSecretsOutOfEveryFile: without a Redactor in Options the
// runner redacts the secret-looking environment (the CLI's case), the
// workflow's secrets: names and token shapes from every file it writes
// (records, index, events, checkpoint, session, workflow copy, Claude
// transcripts) and from stderr and the hooks.
func TestRedactKeepsSecretsOutOfEveryFile(t *testing.T) {
	t.Parallel()
	const (
		token  = "ghs_SuperSecret123"
		ghp    = "ghp_" + "0123456789abcdefghijKLMNOPQRSTUVWXYZ"
		apiSec = "api-secret-value-42"
		hook   = "https://hooks.example/deploy-xyz"
	)
	r := newTestRepo(t, map[string]string{"items.json": `[{"id": 1}, {"id": 2}]`})
	claude := filepath.Join(t.TempDir(), "claude")
	if err := os.WriteFile(claude, []byte(`#!/bin/bash
printf '{"type":"assistant","text":"key %s and %s"}\n' "$API_SECRET" "$GH_PAT"
printf '{"type":"result","subtype":"error","is_error":true,"result":"failed with %s"}\n' "$DEPLOY_URL"
`), 0o755); err != nil {
		t.Fatal(err)
	}
	wf := r.Workflow(`
name: secrets
mode: mapreduce
secrets: [DEPLOY_URL]
map:
  input: items.json
  agent_template:
    - shell: |
        if [ "${item.id}" = 2 ]; then exit 0; fi
        echo "using token $SECRET_TOKEN to push $GH_PAT ($API_SECRET) to $DEPLOY_URL" >&2
        echo "$SECRET_TOKEN" > leaked.txt
        exit 4
    - claude: go
`)
	o, _, stderr, hooks := r.options(wf)
	o.ClaudeCommand = claude
	o.Environ = append(os.Environ(), "SECRET_TOKEN="+token, "GH_PAT="+ghp, "API_SECRET="+apiSec, "DEPLOY_URL="+hook)
	if _, err := r.run(o); err != nil {
		t.Fatal(err)
	}
	secrets := []string{"SuperSecret", ghp, apiSec, hook}
	var found []string
	files := 0
	_ = filepath.Walk(r.Home, func(p string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() || strings.Contains(p, "/worktrees/") {
			return nil
		}
		files++
		data, _ := os.ReadFile(p)
		for _, s := range secrets {
			if strings.Contains(string(data), s) {
				found = append(found, p+": "+s)
			}
		}
		return nil
	})
	if len(found) > 0 || files < 5 {
		t.Fatalf("secrets written to %v (%d files checked)", found, files)
	}
	for _, s := range secrets {
		if strings.Contains(stderr.String(), s) || strings.Contains(fmt.Sprint(hooks), s) {
			t.Errorf("%q reached stderr or the hooks", s)
		}
	}
	rec := r.DLQRecords("job-1")["item_0"]
	if rec.WorktreeArtifacts == nil || rec.WorktreeArtifacts.ErrorLogs == nil || !strings.Contains(*rec.WorktreeArtifacts.ErrorLogs, "using token *** to push *** (***) to ***") {
		t.Errorf("error_logs = %s", mustJSON(t, rec.WorktreeArtifacts))
	}
}

// TestResumeRecognisesMergesTheCheckpointMissed simulates a crash between
// an item's merge and its checkpoint write: the checkpoint says pending,
// the results branch has the merge; resume must not run the item again.
func TestResumeRecognisesMergesTheCheckpointMissed(t *testing.T) {
	t.Parallel()
	r := newTestRepo(t, map[string]string{"items.json": itemsJSON(3)})
	wf := r.Workflow(`
name: reconcile
mode: mapreduce
map:
  input: items.json
  agent_template:
    - shell: echo "${item.n}" > "f-${item.n}" && git add . && git commit -qm "${item.n}"
`)
	o, _, _, _ := r.options(wf)
	res, err := r.run(o)
	if err != nil || res.Successful != 3 {
		t.Fatalf("%v %+v", err, res)
	}
	cpPath := filepath.Join(r.Home, "state", "repo", "jobs", "job-1", "checkpoint.json")
	data, err := os.ReadFile(cpPath)
	if err != nil {
		t.Fatal(err)
	}
	var cp map[string]any
	if err := json.Unmarshal(data, &cp); err != nil {
		t.Fatal(err)
	}
	cp["status"] = "running"
	for _, it := range cp["items"].([]any) {
		it.(map[string]any)["state"] = "running"
	}
	cp["reduce_completed"] = false
	out, _ := json.Marshal(cp)
	if err := os.WriteFile(cpPath, out, 0o644); err != nil {
		t.Fatal(err)
	}
	o2, _, stderr, _ := r.options(nil)
	res2, err := resumeJob(context.Background(), ResumeOptions{Home: r.Home, JobID: "job-1", Run: o2})
	if err != nil || res2.Successful != 3 {
		t.Fatalf("resume: %v %+v\n%s", err, res2, stderr)
	}
	if merges := r.Git("rev-list", "--merges", "--count", res2.ResultsBranch); merges != "3" {
		t.Errorf("%s merges after resume, want 3 (nothing re-run)", merges)
	}
	if !strings.Contains(stderr.String(), "was merged before the interruption") {
		t.Errorf("resume did not report the reconciliation:\n%s", stderr)
	}
}
