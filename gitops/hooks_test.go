package gitops

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// hookNames are the hooks git runs for the commands gitops uses (checkout,
// merge, commit, ref updates, push, worktree administration).
var hookNames = []string{
	"pre-commit", "prepare-commit-msg", "commit-msg", "post-commit", "pre-merge-commit",
	"post-merge", "post-checkout", "reference-transaction", "pre-push", "post-rewrite",
	"pre-auto-gc", "post-index-change", "fsmonitor-watchman", "push-to-checkout", "update", "pre-receive", "post-update",
}

// plantHooks writes, into the repository's shared .git/hooks, every hook as
// a script that appends its name and whatever secrets it can see to log —
// what a hostile agent with write access to the worktree can do.
func plantHooks(t *testing.T, commonDir, log string) {
	t.Helper()
	dir := filepath.Join(commonDir, "hooks")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, h := range hookNames {
		script := fmt.Sprintf("#!/bin/sh\necho \"%s token=${GITHUB_TOKEN:-none} secret=${API_SECRET:-none}\" >> %q\nexit 0\n", h, log)
		if err := os.WriteFile(filepath.Join(dir, h), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

// TestHooksNeverRunInGitopsProcesses: with hooks planted in the shared git
// directory and tokens in the process environment, every operation gitops
// offers runs without any hook, and the child environment has no token;
// a plain git commit by an agent (not gitops) still runs the repository's
// hooks. Not parallel: it sets process environment variables.
func TestHooksNeverRunInGitopsProcesses(t *testing.T) {
	const token, secret = "ghs_HOOKTESTTOKEN123456", "api-secret-value-987654"
	t.Setenv("GITHUB_TOKEN", token)
	t.Setenv("API_SECRET", secret)
	for _, kv := range isolatedEnv() { // no global config, no identity
		k, v, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "GIT_") {
			t.Setenv(k, v)
		}
	}
	dir, _ := newRepo(t, map[string]string{"a.txt": "a\n", "b.txt": "b\n"}, true)
	remote := filepath.Join(t.TempDir(), "remote.git")
	git(t, filepath.Dir(remote), "init", "-q", "--bare", remote)
	git(t, dir, "remote", "add", "origin", remote)
	c, err := New(dir, Options{}) // the default environment: SafeEnv(os.Environ())
	if err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(t.TempDir(), "hooks.log")
	plantHooks(t, c.CommonDir(), log)
	ctx := context.Background()
	base, err := c.Head(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}

	// The agent's side, outside gitops: branches with commits. Hooks run
	// here (it is the agent's own git); the log is reset afterwards.
	wtA := filepath.Join(t.TempDir(), "a")
	must(t, c.WorktreeAdd(ctx, wtA, "agent-a", base))
	agentCommit(t, wtA, "a.txt", "agent a\n", token)
	wtB := filepath.Join(t.TempDir(), "b")
	must(t, c.WorktreeAdd(ctx, wtB, "agent-b", base))
	agentCommit(t, wtB, "b.txt", "agent b\n", token)
	agentLog, _ := os.ReadFile(log)
	if !strings.Contains(string(agentLog), "pre-commit token="+token) {
		t.Fatalf("an agent's own commit did not run the repository's pre-commit hook (log %q): the planted hooks are not valid", agentLog)
	}
	// Worktree administration above went through gitops: only the agent's
	// commit hooks may be in the log.
	for _, line := range strings.Split(strings.TrimSpace(string(agentLog)), "\n") {
		name, _, _ := strings.Cut(line, " ")
		if !slices.Contains([]string{"pre-commit", "prepare-commit-msg", "commit-msg", "post-commit", "reference-transaction", "post-index-change"}, name) {
			t.Errorf("hook %q ran for a gitops operation: %s", name, line)
		}
	}
	must(t, os.Remove(log))

	// Everything the engine does, through gitops.
	parent := filepath.Join(t.TempDir(), "parent")
	must(t, c.WorktreeAdd(ctx, parent, "results", base))
	_, err = c.MergeNoFF(ctx, parent, "agent-a", "merge a")
	must(t, err)
	_, err = c.MergeTree(ctx, "results", "agent-b", "merge b")
	must(t, err)
	must(t, c.SyncWorktree(ctx, parent))
	must(t, c.ResetWorktree(ctx, wtA, "agent-a2", base))
	must(t, c.SwitchBranch(ctx, wtA, "agent-a3", base))
	must(t, c.CleanWorktree(ctx, wtA))
	must(t, c.ResetHard(ctx, wtA, base))
	must(t, c.CreateBranch(ctx, "extra", "results"))
	must(t, c.DeleteBranches(ctx, []string{"extra", "agent-a2"}))
	must(t, c.Push(ctx, "origin", []string{"refs/heads/results:refs/heads/results"}, nil))
	must(t, c.Fetch(ctx, "origin", []string{"refs/heads/results:refs/remotes/origin/results"}, nil))
	must(t, c.WorktreeAddDetached(ctx, filepath.Join(t.TempDir(), "pool"), base))
	must(t, c.WorktreeRemove(ctx, wtB))
	must(t, c.WorktreePrune(ctx))
	if _, err := c.StatusSummary(ctx, parent); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(log); err == nil {
		t.Errorf("hooks ran in gitops' git processes:\n%s", b)
	}

	// And the environment of gitops' git processes carries no secret.
	for _, kv := range c.Env() {
		if strings.Contains(kv, token) || strings.Contains(kv, secret) {
			t.Errorf("git environment carries a secret: %s", kv)
		}
	}
	if !slices.Contains(c.Env(), "GIT_CONFIG_VALUE_"+fmt.Sprint(configIndex(c.Env(), "core.hooksPath"))+"="+os.DevNull) {
		t.Errorf("core.hooksPath is not %s in %v", os.DevNull, c.Env())
	}
}

// configIndex returns n of GIT_CONFIG_KEY_n=key in env, or -1.
func configIndex(env []string, key string) int {
	for _, kv := range env {
		var n int
		if _, err := fmt.Sscanf(kv, "GIT_CONFIG_KEY_%d=", &n); err == nil && strings.HasSuffix(kv, "="+key) {
			return n
		}
	}
	return -1
}

// agentCommit is an agent's own `git commit` in wt, with the repository's
// hooks and the agent's environment (which holds a token).
func agentCommit(t *testing.T, wt, file, content, token string) {
	t.Helper()
	writeFiles(t, wt, map[string]string{file: content})
	for _, args := range [][]string{{"add", "-A"}, {"commit", "-q", "-m", "agent " + file}} {
		cmd := exec.Command("git", append([]string{"-C", wt}, args...)...)
		cmd.Env = append(append(isolatedEnv(), testIdentity...), "GITHUB_TOKEN="+token)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("agent git %v: %v: %s", args, err, out)
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
