package dlqcmd_test

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prodigy-action/prodigy-action/cli/clitest"
	"github.com/prodigy-action/prodigy-action/dlq"
	"github.com/prodigy-action/prodigy-action/gitops/gitopstest"
)

// TestDLQEndToEnd: a run with failures → list/inspect/stats/analyze/export
// show them → fix the cause → dlq retry → successes merged and removed,
// the rest updated.
func TestDLQEndToEnd(t *testing.T) {
	t.Parallel()
	repo := gitopstest.Repo(t, map[string]string{"items.json": `[
		{"id": "ok", "priority": 1},
		{"id": "net", "priority": 5},
		{"id": "perm", "priority": 9}
	]`})
	fixed := filepath.Join(t.TempDir(), "fixed")
	wf := filepath.Join(t.TempDir(), "wf.yml")
	body := fmt.Sprintf(`
name: dlq-e2e
mode: mapreduce
map:
  input: items.json
  max_parallel: 3
  agent_template:
    - shell: |
        case "${item.id}" in
          net)  [ -e %[1]s ] || { echo "connection refused by upstream (network)" >&2; exit 1; } ;;
          perm) echo "permission denied writing /etc/shadow" >&2; exit 13 ;;
        esac
        echo "${item.id}" > "out-${item.id}.txt" && git add . && git commit -qm "${item.id}"
  error_policy:
    retry_config:
      attempts: 2
      initial_delay: 10ms
`, fixed)
	if err := os.WriteFile(wf, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(t.TempDir(), "home")
	code, out, errOut := clitest.Home(home, "run", wf, "--repo", repo, "--job-id", "e2e", "--json")
	if code != 0 {
		t.Fatalf("run exit %d\n%s", code, errOut)
	}
	var res map[string]any
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	if res["successful"].(float64) != 1 || res["dlq_count"].(float64) != 2 {
		t.Fatalf("run result: %s", out)
	}

	code, out, _ = clitest.Home(home, "dlq", "list", "--json")
	if code != 0 || !strings.Contains(out, "item_1") || !strings.Contains(out, "item_2") {
		t.Fatalf("dlq list: %d %s", code, out)
	}
	code, out, _ = clitest.Home(home, "dlq", "list", "--eligible", "--json")
	if code != 0 || !strings.Contains(out, "item_1") || strings.Contains(out, "item_2") {
		t.Fatalf("dlq list --eligible: %d %s", code, out)
	}
	code, out, _ = clitest.Home(home, "dlq", "inspect", "item_2")
	if code != 0 || !strings.Contains(out, `"exit_code": 13`) || !strings.Contains(out, `"manual_review_required": true`) {
		t.Fatalf("dlq inspect: %d %s", code, out)
	}
	code, out, _ = clitest.Home(home, "dlq", "stats", "--json")
	var st map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &st) != nil || st["total_items"].(float64) != 2 || st["eligible_for_reprocess"].(float64) != 1 {
		t.Fatalf("dlq stats: %d %s", code, out)
	}
	analysis := filepath.Join(t.TempDir(), "analysis.json")
	code, _, errOut = clitest.Home(home, "dlq", "analyze", "--export", analysis)
	data, _ := os.ReadFile(analysis)
	if code != 0 || !strings.Contains(string(data), "pattern_groups") || !strings.Contains(string(data), "temporal_distribution") {
		t.Fatalf("dlq analyze: %d %s %s", code, data, errOut)
	}
	csvPath := filepath.Join(t.TempDir(), "dlq.csv")
	if code, _, errOut = clitest.Home(home, "dlq", "export", csvPath, "--format", "csv"); code != 0 {
		t.Fatalf("dlq export: %d %s", code, errOut)
	}
	f, _ := os.Open(csvPath)
	rows, err := csv.NewReader(f).ReadAll()
	f.Close()
	if err != nil || len(rows) != 3 {
		t.Fatalf("csv rows = %d (%v)", len(rows), err)
	}

	// Fix the transient cause and redrive: net succeeds, perm (manual
	// review, not eligible) is only retried with --force and fails again.
	if err := os.WriteFile(fixed, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, _ = clitest.Home(home, "dlq", "retry", "e2e", "--dry-run", "--json")
	if code != 0 || !strings.Contains(out, "item_1") || strings.Contains(out, "item_2") {
		t.Fatalf("dry run: %d %s", code, out)
	}
	// The plan alone: the job's own totals (1 merged, 2 failed) are not
	// mixed into it (issue 27).
	var plan map[string]any
	if err := json.Unmarshal([]byte(out), &plan); err != nil || plan["total"] != 1.0 || plan["pending"] != 1.0 ||
		plan["successful"] != 0.0 || plan["failed"] != 0.0 || plan["skipped"] != 0.0 {
		t.Fatalf("dry-run plan mixes job totals: %v\n%s", err, out)
	}
	code, out, errOut = clitest.Home(home, "dlq", "retry", "e2e", "--force", "--max-retries", "1", "--json")
	if code != 0 {
		t.Fatalf("dlq retry exit %d\n%s", code, errOut)
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	if res["successful"].(float64) != 2 || res["dlq_count"].(float64) != 1 {
		t.Fatalf("retry result: %s\n%s", out, errOut)
	}
	code, out, _ = clitest.Home(home, "dlq", "inspect", "item_2", "--job-id", "e2e")
	var rec map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &rec) != nil || rec["failure_count"].(float64) != 3 {
		t.Fatalf("perm after redrive: %s", out)
	}
	if code, _, _ = clitest.Home(home, "dlq", "inspect", "item_1", "--job-id", "e2e"); code == 0 {
		t.Errorf("item_1 should have left the DLQ")
	}
	files := gitopstest.Out(t, repo, "ls-tree", "-r", "--name-only", "prodigy/e2e")
	if !strings.Contains(files, "out-net.txt") || !strings.Contains(files, "out-ok.txt") || strings.Contains(files, "out-perm.txt") {
		t.Errorf("results branch files:\n%s", files)
	}
}

// TestEveryDLQStoreIsClosed runs every command that opens a job's DLQ, in
// process, and checks after each that no store was left open (an open
// store may hold an index it has not written). Not parallel: the count is
// the process's.
func TestEveryDLQStoreIsClosed(t *testing.T) {
	repo := gitopstest.Repo(t, map[string]string{"items.json": clitest.NumberedItems(4)})
	wf := clitest.Workflow(t, `
name: leak
map:
  input: items.json
  max_parallel: 2
  agent_template:
    - shell: |
        if [ $(( ${item.n} % 2 )) = 1 ]; then echo "odd item" >&2; exit 1; fi
        echo "${item.n}" > "f${item.n}.txt" && git add -A && git commit -qm "item ${item.n}"
`)
	home := t.TempDir()
	export := filepath.Join(t.TempDir(), "dlq.json")
	base := dlq.OpenStores()
	for _, args := range [][]string{
		{"run", wf, "--repo", repo, "--job-id", "leak"},
		{"status", "leak"}, {"status", "leak", "--json"}, {"jobs"},
		{"dlq", "list", "--job-id", "leak"}, {"dlq", "inspect", "item_1", "--job-id", "leak"},
		{"dlq", "stats", "--job-id", "leak"}, {"dlq", "analyze", "--job-id", "leak"},
		{"dlq", "export", export, "--job-id", "leak"},
		{"dlq", "retry", "leak", "--dry-run"}, {"dlq", "retry", "leak", "--signature", "CommandFailed::odd item", "--sample", "1", "--dry-run"},
		{"dlq", "retry", "leak"}, {"resume", "leak", "--include-dlq"},
		{"dlq", "clear", "leak", "--yes"},
	} {
		code, _, errOut := clitest.Home(home, args...)
		if code > 1 {
			t.Fatalf("%v: exit %d\n%s", args, code, errOut)
		}
		if n := dlq.OpenStores() - base; n != 0 {
			t.Errorf("%v left %d DLQ store(s) open", args, n)
		}
	}
}
