package dlqcmd_test

import (
	"encoding/csv"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prodigy-action/prodigy-action/cli/clitest"

	"github.com/prodigy-action/prodigy-action/cli/cmdutil"
	"github.com/prodigy-action/prodigy-action/jobstore"

	"github.com/prodigy-action/prodigy-action/dlq"
	"github.com/prodigy-action/prodigy-action/report"
)

var dlqNow = time.Date(2025, 1, 20, 12, 0, 0, 0, time.UTC)

// runDLQ runs the CLI in-process with PRODIGY_HOME=home, stdin and a fixed clock.
func runDLQ(t *testing.T, home, stdin string, args ...string) (int, string, string) {
	t.Helper()
	return clitest.Run{Env: map[string]string{"PRODIGY_HOME": home}, Stdin: stdin, Now: dlqNow}.Exec(args...)
}

type seedItem struct {
	id      string
	msg     string
	typ     *dlq.ErrorType
	daysAgo int
}

// seedDLQ stores items in job of repo under home.
func seedDLQ(t *testing.T, home, repo, job string, items ...seedItem) *dlq.Store {
	t.Helper()
	s, err := dlq.Open(jobstore.Paths{Home: home, Repo: repo, JobID: job}.DLQRoot(), job, dlq.Options{Warn: func(m string) { t.Log(m) }})
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range items {
		when := dlqNow.Add(-time.Duration(it.daysAgo) * 24 * time.Hour)
		d := dlq.FromAgentResult(dlq.AgentResult{ItemID: it.id, ItemData: json.RawMessage(`{"path":"src/a.go","priority":5}`),
			Status: dlq.StatusFailed, Failures: []dlq.Failure{{At: when, Type: it.typ, Message: it.msg, AgentID: "agent-1",
				Step: "shell: make", LogPath: "/logs/" + it.id + ".jsonl"}},
			WorktreePath: "/wt/" + it.id, BranchName: "b-" + it.id})
		if _, err := s.Add(*d); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return s
}

func standardDLQ(t *testing.T) string {
	home := t.TempDir()
	seedDLQ(t, home, "proj", "job-1",
		seedItem{id: "item-1", msg: "make failed with exit code 2", daysAgo: 3},
		seedItem{id: "item-2", msg: "step timed out after 30s", daysAgo: 1},
		seedItem{id: "item-3", msg: "Commit required but no commit was created", daysAgo: 10},
	)
	return home
}

func TestDLQList(t *testing.T) {
	home := standardDLQ(t)
	code, out, errOut := runDLQ(t, home, "", "dlq", "list")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "ITEM ID") {
		t.Fatalf("table:\n%s", out)
	}
	for i, want := range []string{"item-2", "item-1", "item-3"} { // newest last attempt first
		if !strings.HasPrefix(lines[i+1], want+" ") {
			t.Errorf("row %d = %q, want %s first", i+1, lines[i+1], want)
		}
	}
	if !strings.Contains(lines[2], "CommandFailed(2)") || !strings.Contains(lines[2], "CommandFailed::make failed with exit code") {
		t.Errorf("row for item-1 = %q", lines[2])
	}

	code, out, _ = runDLQ(t, home, "", "dlq", "list", "--eligible", "--json")
	var got report.DLQList
	if code != 0 || json.Unmarshal([]byte(out), &got) != nil {
		t.Fatalf("exit %d, stdout %q", code, out)
	}
	if got.JobID != "job-1" || got.Repo != "proj" || got.Total != 2 || len(got.Items) != 2 || got.Items[0].ItemID != "item-2" {
		t.Errorf("--eligible --json = %+v", got)
	}
	var raw map[string]any
	_ = json.Unmarshal([]byte(out), &raw)
	row := raw["items"].([]any)[1].(map[string]any)
	if !reflect.DeepEqual(row["error_type"], map[string]any{"CommandFailed": map[string]any{"exit_code": float64(2)}}) {
		t.Errorf("error_type JSON = %v", row["error_type"])
	}

	code, out, errOut = runDLQ(t, home, "", "dlq", "list", "--limit", "1")
	if code != 0 || strings.Count(out, "\n") != 2 || !strings.Contains(errOut, "showing 1 of 3") {
		t.Errorf("--limit 1: exit %d\n%s\n%s", code, out, errOut)
	}
	if code, _, _ := runDLQ(t, home, "", "dlq", "list", "--limit", "-1"); code != 2 {
		t.Errorf("--limit -1 exit %d, want 2", code)
	}
}

// TestDLQJobResolution: without a job id the dlq commands use the newest
// job and say which (issue 27), an empty store answers like an empty
// listing (exit 0, "no records", issue 29), an unknown job id stays a
// usage error (exit 2).
func TestDLQJobResolution(t *testing.T) {
	empty := t.TempDir()
	exportFile := filepath.Join(t.TempDir(), "x.json")
	for _, tc := range []struct {
		args    []string
		stdout  string
		errPart string
	}{
		{[]string{"dlq", "stats"}, "", "no records: no job has a dead letter queue"},
		{[]string{"dlq", "show"}, "", "no records"},
		{[]string{"dlq", "list"}, "", "no records"},
		{[]string{"dlq", "list", "--json"}, `{"job_id":"","repo":"","total":0,"items":[]}` + "\n", ""},
		{[]string{"dlq", "analyze"}, "", "no records"},
		{[]string{"dlq", "purge", "--older-than-days", "30"}, "", "nothing to purge: no records"},
		{[]string{"dlq", "export", exportFile}, "", "exported 0 items"},
	} {
		code, out, errOut := runDLQ(t, empty, "", tc.args...)
		if code != 0 || out != tc.stdout || !strings.Contains(errOut, tc.errPart) {
			t.Errorf("%v on an empty store: exit %d, %q, %q", tc.args, code, out, errOut)
		}
	}
	if b, err := os.ReadFile(exportFile); err != nil || string(b) != "[]\n" {
		t.Errorf("empty export = %q, %v", b, err)
	}
	code, out, _ := runDLQ(t, empty, "", "dlq", "stats", "--json")
	if code != 0 || !strings.Contains(out, `"total_items":0`) {
		t.Errorf("stats --json on an empty store: exit %d, %s", code, out)
	}
	if entries, _ := os.ReadDir(empty); len(entries) != 0 {
		t.Errorf("reading created state: %v", entries)
	}
	// Usage errors stay exit 2 on an empty store.
	for _, args := range [][]string{{"dlq", "list", "--limit", "-1"}, {"dlq", "list", "--job-id", "nope"}, {"dlq", "inspect", "item-1"},
		{"dlq", "purge"}, {"dlq", "clear", "nope", "--yes"}, {"dlq", "show", "a", "b"}} {
		if code, _, errOut := runDLQ(t, empty, "", args...); code != 2 {
			t.Errorf("%v on an empty store: exit %d, want 2 (%s)", args, code, errOut)
		}
	}

	home := standardDLQ(t)
	seedDLQ(t, home, "other", "job-2", seedItem{id: "x", msg: "boom", daysAgo: 1})
	for _, cmd := range [][]string{{"dlq", "list"}, {"dlq", "stats", "--json"}, {"dlq", "analyze"}, {"dlq", "export", filepath.Join(t.TempDir(), "x.json")},
		{"dlq", "purge", "--older-than-days", "1", "--yes"}} {
		code, out, errOut := runDLQ(t, home, "", cmd...)
		if code != 0 || !strings.Contains(errOut, "job job-2 (repo other): the newest of 2 jobs") || !strings.Contains(errOut, "`latest`") ||
			!strings.Contains(errOut, "--job-id") || !strings.Contains(errOut, "job-1 (repo proj)") {
			t.Errorf("%v with two jobs: exit %d, stdout %q, stderr %q", cmd, code, out, errOut)
		}
		if cmd[1] != "export" && cmd[1] != "purge" && !strings.Contains(out, "job-2") && !strings.Contains(out, "x ") {
			t.Errorf("%v with two jobs did not show job-2: %q", cmd, out)
		}
	}
	// inspect finds the item in the one job that holds it.
	if code, out, errOut := runDLQ(t, home, "", "dlq", "inspect", "item-1"); code != 0 || !strings.Contains(out, `"item_id": "item-1"`) {
		t.Errorf("inspect item-1 with two jobs: exit %d, %q, %q", code, out, errOut)
	}
	if code, out, _ := runDLQ(t, home, "", "dlq", "stats", "--json", "--job-id", "job-2"); code != 0 || !strings.Contains(out, `"total_items":1`) {
		t.Errorf("--job-id job-2: exit %d %s", code, out)
	}
	code, _, errOut := runDLQ(t, home, "", "dlq", "list", "--job-id", "nope")
	if code != 2 || !strings.Contains(errOut, `no dead letter queue for job "nope"`) || !strings.Contains(errOut, "job-2") {
		t.Errorf("unknown job: exit %d, %q", code, errOut)
	}
	// A job that ran but dead-lettered nothing has an empty DLQ.
	if err := os.MkdirAll(filepath.Join(home, "state", "proj", "jobs", "job-ok"), 0o755); err != nil {
		t.Fatal(err)
	}
	code, out, _ = runDLQ(t, home, "", "dlq", "list", "--job-id", "job-ok", "--json")
	if code != 0 || !strings.Contains(out, `"total":0,"items":[]`) {
		t.Errorf("job without failures: exit %d, %s", code, out)
	}
}

func TestDLQInspect(t *testing.T) {
	home := standardDLQ(t)
	code, out, errOut := runDLQ(t, home, "", "dlq", "inspect", "item-1")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	file, err := os.ReadFile(filepath.Join(dlq.Dir(jobstore.Paths{Home: home, Repo: "proj", JobID: "job-1"}.DLQRoot(), "job-1"), "items", "item-1.json"))
	if err != nil {
		t.Fatal(err)
	}
	if out != string(file) {
		t.Errorf("inspect output differs from the item file:\n%s\n---\n%s", out, file)
	}
	var d dlq.DeadLetteredItem
	if err := json.Unmarshal([]byte(out), &d); err != nil || *d.FailureHistory[0].JSONLogLocation != "/logs/item-1.jsonl" || d.WorktreeArtifacts.WorktreePath != "/wt/item-1" {
		t.Errorf("record = %+v, %v", d, err)
	}
	if code, out, errOut := runDLQ(t, home, "", "dlq", "inspect", "missing"); code != 2 || out != "" || !strings.Contains(errOut, `"missing" is not in the dead letter queue`) {
		t.Errorf("missing item: exit %d, %q, %q", code, out, errOut)
	}
	if code, _, _ := runDLQ(t, home, "", "dlq", "inspect"); code != 2 {
		t.Errorf("no ITEM_ID: exit %d, want 2", code)
	}
}

func TestDLQStats(t *testing.T) {
	home := standardDLQ(t)
	code, out, errOut := runDLQ(t, home, "", "dlq", "stats", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if strings.Count(strings.TrimSpace(out), "\n") != 0 {
		t.Errorf("--json must print one JSON object: %q", out)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	want := []string{"average_failure_count", "by_error_type", "eligible_for_reprocess", "error_categories", "job_id",
		"newest_item", "oldest_item", "repo", "requiring_manual_review", "total_items"}
	if !reflect.DeepEqual(keys, want) {
		t.Errorf("keys = %v, want %v", keys, want)
	}
	if m["total_items"] != 3.0 || m["eligible_for_reprocess"] != 2.0 || m["requiring_manual_review"] != 1.0 || m["average_failure_count"] != 1.0 {
		t.Errorf("stats = %v", m)
	}
	if m["oldest_item"] != "2025-01-10T12:00:00Z" || m["newest_item"] != "2025-01-19T12:00:00Z" {
		t.Errorf("oldest/newest = %v/%v", m["oldest_item"], m["newest_item"])
	}
	if !reflect.DeepEqual(m["by_error_type"], map[string]any{"CommandFailed": 1.0, "Timeout": 1.0, "CommitValidationFailed": 1.0}) {
		t.Errorf("by_error_type = %v", m["by_error_type"])
	}
	code, out, _ = runDLQ(t, home, "", "dlq", "stats")
	if code != 0 || !strings.Contains(out, "Total items:") || !strings.Contains(out, "Requiring manual review:") || !strings.Contains(out, "Timeout::step timed out after") {
		t.Errorf("human stats: exit %d\n%s", code, out)
	}
}

func TestDLQAnalyze(t *testing.T) {
	home := t.TempDir()
	seedDLQ(t, home, "proj", "job-1",
		seedItem{id: "a", msg: "Connection failed at /x/y.go:1 with error code 4", daysAgo: 1},
		seedItem{id: "b", msg: "Connection failed at /z.go:9 with error code 7", daysAgo: 1},
		seedItem{id: "c", msg: "boom", daysAgo: 2},
	)
	code, out, errOut := runDLQ(t, home, "", "dlq", "analyze")
	if code != 0 || !strings.Contains(out, "Unknown::Connection failed at with error code") || !strings.Contains(out, "a, b") {
		t.Errorf("analyze: exit %d\n%s\n%s", code, out, errOut)
	}
	file := filepath.Join(t.TempDir(), "analysis.json")
	code, out, errOut = runDLQ(t, home, "", "dlq", "analyze", "--export", file)
	if code != 0 || out != "" || !strings.Contains(errOut, file) {
		t.Fatalf("--export: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var an struct {
		TotalItems    int `json:"total_items"`
		PatternGroups []struct {
			Signature   string   `json:"signature"`
			Count       int      `json:"count"`
			SampleItems []string `json:"sample_items"`
		} `json:"pattern_groups"`
		ErrorDistribution    map[string]int `json:"error_distribution"`
		TemporalDistribution []struct {
			Hour  time.Time `json:"hour"`
			Count int       `json:"count"`
		} `json:"temporal_distribution"`
	}
	if err := json.Unmarshal(b, &an); err != nil {
		t.Fatal(err)
	}
	if an.TotalItems != 3 || len(an.PatternGroups) != 2 || an.PatternGroups[0].Count != 2 || !reflect.DeepEqual(an.PatternGroups[0].SampleItems, []string{"a", "b"}) ||
		an.ErrorDistribution["Unknown"] != 3 || len(an.TemporalDistribution) != 2 {
		t.Errorf("analysis = %+v", an)
	}
}

func TestDLQExport(t *testing.T) {
	home := t.TempDir()
	seedDLQ(t, home, "proj", "job-1",
		seedItem{id: "plain", msg: "make failed with exit code 2", daysAgo: 1},
		seedItem{id: "tricky,\"id\"", msg: "line one, with \"quotes\"\nline two", daysAgo: 2},
	)
	dir := t.TempDir()
	jsonFile := filepath.Join(dir, "items.json")
	if code, _, errOut := runDLQ(t, home, "", "dlq", "export", jsonFile); code != 0 || !strings.Contains(errOut, "exported 2 items") {
		t.Fatalf("json export: exit %d, %s", code, errOut)
	}
	var records []dlq.DeadLetteredItem
	b, _ := os.ReadFile(jsonFile)
	if err := json.Unmarshal(b, &records); err != nil || len(records) != 2 {
		t.Fatalf("json export = %d records, %v\n%s", len(records), err, b)
	}

	csvFile := filepath.Join(dir, "items.csv") // format from the extension
	if code, _, errOut := runDLQ(t, home, "", "dlq", "export", csvFile); code != 0 {
		t.Fatalf("csv export: exit %d, %s", code, errOut)
	}
	f, err := os.Open(csvFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatalf("not RFC 4180 CSV: %v", err)
	}
	if len(rows) != 3 || !reflect.DeepEqual(rows[0], dlq.CSVHeader) {
		t.Fatalf("rows = %q", rows)
	}
	byID := map[string][]string{rows[1][0]: rows[1], rows[2][0]: rows[2]}
	tricky := byID["tricky,\"id\""]
	if tricky == nil || tricky[8] != "line one, with \"quotes\"\nline two" {
		t.Errorf("tricky row = %q", tricky)
	}
	if plain := byID["plain"]; plain[1] != `{"path":"src/a.go","priority":5}` || plain[2] != "CommandFailed" || plain[3] != "2" || plain[4] != "1" || plain[16] != `{"path":"src/a.go","priority":5}` {
		t.Errorf("plain row = %q", plain)
	}

	code, out, _ := runDLQ(t, home, "", "dlq", "export", "-", "--format", "csv")
	if code != 0 || !strings.HasPrefix(out, strings.Join(dlq.CSVHeader, ",")+"\n") {
		t.Errorf("export to stdout: exit %d, %q", code, out)
	}
	if code, _, _ := runDLQ(t, home, "", "dlq", "export", filepath.Join(dir, "x"), "--format", "xml"); code != 2 {
		t.Errorf("--format xml exit %d, want 2", code)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 2 {
		t.Errorf("temporary files left behind: %v", entries)
	}
}

func TestDLQClear(t *testing.T) {
	tests := []struct {
		name     string
		stdin    string
		args     []string
		wantCode int
		cleared  bool
	}{
		{"declined", "n\n", nil, 1, false},
		{"no_answer", "", nil, 2, false},
		{"confirmed", "yes\n", nil, 0, true},
		{"yes_flag", "", []string{"--yes"}, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			home := standardDLQ(t)
			seedDLQ(t, home, "other", "job-2", seedItem{id: "x", msg: "boom"})
			code, _, errOut := runDLQ(t, home, tt.stdin, append([]string{"dlq", "clear", "job-1"}, tt.args...)...)
			if code != tt.wantCode {
				t.Fatalf("exit %d, want %d: %s", code, tt.wantCode, errOut)
			}
			if tt.args == nil && !strings.Contains(errOut, "Delete all 3 items") {
				t.Errorf("prompt missing: %q", errOut)
			}
			jobs, _ := jobstore.DLQJobs(home)
			if got := len(jobs) == 1; got != tt.cleared {
				t.Errorf("cleared = %v, want %v (jobs %v)", got, tt.cleared, jobs)
			}
		})
	}
	if code, _, _ := runDLQ(t, standardDLQ(t), "", "dlq", "clear", "nope", "--yes"); code != 2 {
		t.Errorf("unknown job exit %d, want 2", code)
	}
}

func TestDLQPurge(t *testing.T) {
	home := standardDLQ(t) // items 3, 1 and 10 days old
	if code, _, errOut := runDLQ(t, home, "", "dlq", "purge"); code != 2 || !strings.Contains(errOut, "--older-than-days") {
		t.Errorf("missing --older-than-days: exit %d, %s", code, errOut)
	}
	if code, _, _ := runDLQ(t, home, "n\n", "dlq", "purge", "--older-than-days", "2"); code != 1 {
		t.Errorf("declined purge exit %d, want 1", code)
	}
	code, _, errOut := runDLQ(t, home, "", "dlq", "purge", "--older-than-days", "2", "--yes")
	if code != 0 || !strings.Contains(errOut, "purged 2 items") {
		t.Fatalf("purge: exit %d, %s", code, errOut)
	}
	_, out, _ := runDLQ(t, home, "", "dlq", "list", "--json")
	var got report.DLQList
	if err := json.Unmarshal([]byte(out), &got); err != nil || got.Total != 1 || got.Items[0].ItemID != "item-2" {
		t.Errorf("after purge: %s", out)
	}
	idx, _ := os.ReadFile(filepath.Join(dlq.Dir(jobstore.Paths{Home: home, Repo: "proj", JobID: "job-1"}.DLQRoot(), "job-1"), "index.json"))
	if !strings.Contains(string(idx), `"item_count": 1`) {
		t.Errorf("index.json after purge:\n%s", idx)
	}
	if code, _, errOut := runDLQ(t, home, "", "dlq", "purge", "--older-than-days", "30"); code != 0 || !strings.Contains(errOut, "nothing to purge") {
		t.Errorf("nothing to purge: exit %d, %s", code, errOut)
	}
}
func TestDLQShowIsStats(t *testing.T) {
	t.Parallel()
	home := standardDLQ(t)
	_, stats, _ := runDLQ(t, home, "", "dlq", "stats", "--json")
	code, show, errOut := runDLQ(t, home, "", "dlq", "show", "--json")
	if code != 0 || show != stats || !strings.Contains(show, `"total_items":3`) {
		t.Errorf("dlq show: exit %d, %q (%s); stats printed %q", code, show, errOut, stats)
	}
}

// TestWorkflowIDAlias: Prodigy's --workflow-id selects the job wherever
// --job-id does.
func TestWorkflowIDAlias(t *testing.T) {
	t.Parallel()
	home := standardDLQ(t)
	seedDLQ(t, home, "other", "job-2", seedItem{id: "x", msg: "boom", daysAgo: 1})
	for _, args := range [][]string{
		{"dlq", "list", "--json"}, {"dlq", "stats", "--json"}, {"dlq", "analyze", "--json"}, {"dlq", "inspect", "x"},
		{"dlq", "export", "-"}, {"dlq", "purge", "--older-than-days", "30", "--yes"},
	} {
		code, out, errOut := runDLQ(t, home, "", append(args, "--workflow-id", "job-2")...)
		if code != 0 || (args[1] != "purge" && !strings.Contains(out, `"x"`) && !strings.Contains(out, `"job-2"`)) {
			t.Errorf("%v --workflow-id job-2: exit %d, stdout %q, stderr %q", args, code, out, errOut)
		}
		if code, _, _ := runDLQ(t, home, "", append(args, "--workflow-id=job-2")...); code != 0 {
			t.Errorf("%v --workflow-id=job-2: exit %d", args, code)
		}
	}
}

func TestDLQRetryMaxParallelAlias(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	// The alias reaches --parallel's variable: its check names --parallel.
	code, _, errOut := runDLQ(t, home, "", "dlq", "retry", "job-1", "--max-parallel", "-1")
	if code != cmdutil.ExitUsage || !strings.Contains(errOut, "--parallel must be positive") {
		t.Errorf("--max-parallel -1: exit %d, %q", code, errOut)
	}
	// A valid value parses and the command goes on to look for the job.
	code, _, errOut = runDLQ(t, home, "", "dlq", "retry", "job-1", "--max-parallel", "4", "--dry-run")
	if code != cmdutil.ExitUsage || strings.Contains(errOut, "unknown flag") || !strings.Contains(errOut, "job-1") {
		t.Errorf("--max-parallel 4: exit %d, %q", code, errOut)
	}
}

// TestCorruptRecordIsRuntimeFailure: a record that cannot be read is a
// failure of the command (1), not a usage error (2).
func TestCorruptRecordIsRuntimeFailure(t *testing.T) {
	t.Parallel()
	home := standardDLQ(t)
	file := filepath.Join(dlq.Dir(jobstore.Paths{Home: home, Repo: "proj", JobID: "job-1"}.DLQRoot(), "job-1"), "items", "item-1.json")
	if err := os.WriteFile(file, []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runDLQ(t, home, "", "dlq", "inspect", "item-1")
	if code != cmdutil.ExitFailed || out != "" || !strings.Contains(errOut, "error:") {
		t.Errorf("corrupt record: exit %d, stdout %q, stderr %q; want 1", code, out, errOut)
	}
}
