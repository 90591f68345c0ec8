package runner_test

import (
	"bytes"
	"encoding/json"
	"os"
	"reflect"
	"sort"
	"testing"

	"github.com/prodigy-action/prodigy-action/dlq"
	"github.com/prodigy-action/prodigy-action/runner"
)

// TestRealFailuresHaveTheSeedShape runs real failing items (a non-zero exit,
// a timeout, a merge conflict, a missing required commit) and checks each
// record file, as written on disk, against the field set and value types of
// the seeds' DeadLetteredItem / FailureDetail / WorktreeArtifacts.
func TestRealFailuresHaveTheSeedShape(t *testing.T) {
	t.Parallel()
	r := newTestRepo(t, map[string]string{
		"items.json": `[{"k": "exit"}, {"k": "timeout"}, {"k": "left"}, {"k": "right"}, {"k": "nocommit"}]`,
		"shared.txt": "base\n",
	})
	wf := r.Workflow(`
name: shapes
mode: mapreduce
map:
  input: items.json
  max_parallel: 5
  agent_template:
    - shell: |
        case "${item.k}" in
          exit) echo "cargo test failed" >&2; exit 101 ;;
          timeout) sleep 5 ;;
          left|right) echo "${item.k}" > shared.txt; sleep 0.3; git commit -qam "${item.k}" ;;
        esac
      timeout: 1s
      commit_required: true
`)
	o, _, stderr, _ := r.options(wf)
	res, err := r.run(o)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, stderr)
	}
	if res.Failed != 4 || res.Successful != 1 {
		t.Fatalf("result = %+v\n%s", res, stderr)
	}
	store, err := dlq.Open(runner.Paths{Home: r.Home, Repo: "repo", JobID: "job-1"}.DLQRoot(), "job-1", dlq.Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"item_0": `{"CommandFailed":{"exit_code":101}}`,
		"item_1": `"Timeout"`,
		"item_4": `"CommitValidationFailed"`,
	}
	types := map[string]int{}
	for _, id := range []string{"item_0", "item_1", "item_2", "item_3", "item_4"} {
		raw, err := os.ReadFile(store.ItemPath(id))
		if err != nil {
			continue // the item that merged has no record
		}
		var rec map[string]json.RawMessage
		if err := json.Unmarshal(raw, &rec); err != nil {
			t.Fatal(err)
		}
		assertKeys(t, id, rec, []string{"item_id", "item_data", "first_attempt", "last_attempt", "failure_count",
			"failure_history", "error_signature", "worktree_artifacts", "reprocess_eligible", "manual_review_required"}, nil)
		var hist []map[string]json.RawMessage
		if err := json.Unmarshal(rec["failure_history"], &hist); err != nil || len(hist) != 1 {
			t.Fatalf("%s failure_history: %v %s", id, err, rec["failure_history"])
		}
		h := hist[0]
		assertKeys(t, id+".failure_history[0]", h, []string{"attempt_number", "timestamp", "error_type", "error_message",
			"stack_trace", "agent_id", "step_failed", "duration_ms", "json_log_location"}, []string{"error_context"})
		var wa map[string]json.RawMessage
		if err := json.Unmarshal(rec["worktree_artifacts"], &wa); err != nil {
			t.Fatal(err)
		}
		assertKeys(t, id+".worktree_artifacts", wa, []string{"worktree_path", "branch_name", "uncommitted_changes", "error_logs"}, nil)
		var compact bytes.Buffer
		if err := json.Compact(&compact, h["error_type"]); err != nil {
			t.Fatal(err)
		}
		et := compact.String()
		if w, ok := want[id]; ok && et != w {
			t.Errorf("%s error_type = %s, want %s", id, et, w)
		}
		types[et]++
		var n float64
		if json.Unmarshal(rec["failure_count"], &n) != nil || n != 1 {
			t.Errorf("%s failure_count = %s", id, rec["failure_count"])
		}
	}
	if types[`"MergeConflict"`] != 1 {
		t.Errorf("want exactly one MergeConflict among left/right, got %v", types)
	}
}

// assertKeys checks that m has exactly the required keys plus any optional ones.
func assertKeys(t *testing.T, what string, m map[string]json.RawMessage, required, optional []string) {
	t.Helper()
	var got []string
	for k := range m {
		got = append(got, k)
	}
	allowed := map[string]bool{}
	for _, k := range append(append([]string{}, required...), optional...) {
		allowed[k] = true
	}
	var extra, missing []string
	for _, k := range got {
		if !allowed[k] {
			extra = append(extra, k)
		}
	}
	for _, k := range required {
		if _, ok := m[k]; !ok {
			missing = append(missing, k)
		}
	}
	sort.Strings(extra)
	sort.Strings(missing)
	if !reflect.DeepEqual(extra, []string(nil)) || !reflect.DeepEqual(missing, []string(nil)) {
		t.Errorf("%s: extra keys %v, missing keys %v", what, extra, missing)
	}
}
