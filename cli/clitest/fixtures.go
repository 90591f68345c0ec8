package clitest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prodigy-action/prodigy-action/dlq"
	"github.com/prodigy-action/prodigy-action/gitops/gitopstest"
	"github.com/prodigy-action/prodigy-action/jobstore"
)

// Workflow writes body as a workflow file in a new temporary directory and
// returns its path.
func Workflow(t testing.TB, body string) string {
	t.Helper()
	wf := filepath.Join(t.TempDir(), "wf.yml")
	if err := os.WriteFile(wf, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return wf
}

// FakeClaude writes an executable Claude Code stand-in that runs script
// in bash (its arguments are Claude Code's: the prompt comes last) and
// returns its path, for Run.Claude or PRODIGY_CLAUDE_COMMAND.
func FakeClaude(t testing.TB, script string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "claude")
	if err := os.WriteFile(p, []byte("#!/usr/bin/env bash\n"+script), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// Clone clones origin into a new temporary directory named name (the
// clone's repository name in the state directory) and returns its path.
func Clone(t testing.TB, origin, name string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), name)
	gitopstest.Out(t, filepath.Dir(dir), "clone", "-q", origin, dir)
	return dir
}

// DLQSummary is id → "ErrorType/failure_count/attempts…" (the last
// failure's type, then every failure's attempt number) of the DLQ of job
// of repo under home.
func DLQSummary(t testing.TB, home, repo, job string) map[string]string {
	t.Helper()
	p := jobstore.Paths{Home: home, Repo: repo, JobID: job}
	store, err := dlq.Open(p.DLQRoot(), job, dlq.Options{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	if err := store.Each(func(r dlq.DeadLetteredItem) error {
		var attempts []string
		for _, f := range r.FailureHistory {
			attempts = append(attempts, fmt.Sprint(f.AttemptNumber))
		}
		last := r.FailureHistory[len(r.FailureHistory)-1]
		out[r.ItemID] = fmt.Sprintf("%s/%d/%s", last.ErrorType, r.FailureCount, strings.Join(attempts, ","))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// CommitItem is a shell step that commits its item: the item's JSON in
// out-<index>.txt, one commit named after the item's id.
const CommitItem = `echo "${item}" > "out-${item_index}.txt" && git add . && git commit -qm "${item_id}"`

// NumberedItems is a JSON array of n items {"n": 0} … {"n": n-1}.
func NumberedItems(n int) string {
	items := make([]string, n)
	for i := range items {
		items[i] = fmt.Sprintf(`{"n": %d}`, i)
	}
	return "[" + strings.Join(items, ",") + "]"
}

// Cost is the spend part of the --json result of run, resume, status or
// dlq retry.
type Cost struct {
	Status     string  `json:"status"`
	CostUSD    float64 `json:"cost_usd"`
	MaxCostUSD float64 `json:"max_cost_usd"`
	Pending    int     `json:"pending"`
	Successful int     `json:"successful"`
	Items      []struct {
		ItemID  string  `json:"item_id"`
		State   string  `json:"state"`
		CostUSD float64 `json:"cost_usd"`
	} `json:"items"`
}

// DecodeCost decodes out, a --json result, or fails t.
func DecodeCost(t testing.TB, out string) Cost {
	t.Helper()
	var r Cost
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("decode %q: %v", out, err)
	}
	return r
}
