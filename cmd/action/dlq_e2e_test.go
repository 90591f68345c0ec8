package main

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDLQEndToEnd: a run with failures → list/inspect/stats/analyze/export
// show them → fix the cause → dlq retry → successes merged and removed,
// the rest updated.
func TestDLQEndToEnd(t *testing.T) {
	t.Parallel()
	repo := cliRepo(t, map[string]string{"items.json": `[
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
	code, out, errOut := runCLI(t, home, "run", wf, "--repo", repo, "--job-id", "e2e", "--json")
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

	code, out, _ = runCLI(t, home, "dlq", "list", "--json")
	if code != 0 || !strings.Contains(out, "item_1") || !strings.Contains(out, "item_2") {
		t.Fatalf("dlq list: %d %s", code, out)
	}
	code, out, _ = runCLI(t, home, "dlq", "list", "--eligible", "--json")
	if code != 0 || !strings.Contains(out, "item_1") || strings.Contains(out, "item_2") {
		t.Fatalf("dlq list --eligible: %d %s", code, out)
	}
	code, out, _ = runCLI(t, home, "dlq", "inspect", "item_2")
	if code != 0 || !strings.Contains(out, `"exit_code": 13`) || !strings.Contains(out, `"manual_review_required": true`) {
		t.Fatalf("dlq inspect: %d %s", code, out)
	}
	code, out, _ = runCLI(t, home, "dlq", "stats", "--json")
	var st map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &st) != nil || st["total_items"].(float64) != 2 || st["eligible_for_reprocess"].(float64) != 1 {
		t.Fatalf("dlq stats: %d %s", code, out)
	}
	analysis := filepath.Join(t.TempDir(), "analysis.json")
	code, _, errOut = runCLI(t, home, "dlq", "analyze", "--export", analysis)
	data, _ := os.ReadFile(analysis)
	if code != 0 || !strings.Contains(string(data), "pattern_groups") || !strings.Contains(string(data), "temporal_distribution") {
		t.Fatalf("dlq analyze: %d %s %s", code, data, errOut)
	}
	csvPath := filepath.Join(t.TempDir(), "dlq.csv")
	if code, _, errOut = runCLI(t, home, "dlq", "export", csvPath, "--format", "csv"); code != 0 {
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
	code, out, _ = runCLI(t, home, "dlq", "retry", "e2e", "--dry-run", "--json")
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
	code, out, errOut = runCLI(t, home, "dlq", "retry", "e2e", "--force", "--max-retries", "1", "--json")
	if code != 0 {
		t.Fatalf("dlq retry exit %d\n%s", code, errOut)
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	if res["successful"].(float64) != 2 || res["dlq_count"].(float64) != 1 {
		t.Fatalf("retry result: %s\n%s", out, errOut)
	}
	code, out, _ = runCLI(t, home, "dlq", "inspect", "item_2", "--job-id", "e2e")
	var rec map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &rec) != nil || rec["failure_count"].(float64) != 3 {
		t.Fatalf("perm after redrive: %s", out)
	}
	if code, _, _ = runCLI(t, home, "dlq", "inspect", "item_1", "--job-id", "e2e"); code == 0 {
		t.Errorf("item_1 should have left the DLQ")
	}
	files := gitOut(t, repo, "ls-tree", "-r", "--name-only", "prodigy/e2e")
	if !strings.Contains(files, "out-net.txt") || !strings.Contains(files, "out-ok.txt") || strings.Contains(files, "out-perm.txt") {
		t.Errorf("results branch files:\n%s", files)
	}
}
