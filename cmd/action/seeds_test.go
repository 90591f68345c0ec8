package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prodigy-action/prodigy-action/cli/clitest"
	"github.com/prodigy-action/prodigy-action/config"
	"github.com/prodigy-action/prodigy-action/dlq"
	"github.com/prodigy-action/prodigy-action/validate"
)

// seedDifference is one intentional difference from the seeds: the suite
// applies or checks it by name, and README.md's "Differences from
// Prodigy" table lists every one (TestSeedDifferencesAreInTheREADME).
type seedDifference struct {
	Name     string
	Seed     string // what the seed says
	Here     string // what prodigy-action does
	Decision string // who decided and why
}

// seedDifferences is the explicit list of intentional differences.
var seedDifferences = []seedDifference{
	{"binary-name", "`prodigy …`", "`prodigy-action …`", "the product's name (brief); commands run as written with that one word read so"},
	{"item-ids", "ids such as item-123 come from the input", "an item's id is `item_<index>` unless `map.id_field` names a field; the suite's job adds `id_field: id` to the guide's workflow", "DESIGN.md: ids stay stable when the input changes only when the user names the field"},
	{"job-ids", "`<workflow_id>`, `<job_id>`, `my-workflow`", "job ids (`run --job-id`, `latest`); the suite runs jobs named mapreduce-1234567890 and my-workflow", "DESIGN.md command line: dlq commands take JOB_ID"},
	{"claude-log", "json_log_location: ~/.local/state/claude/logs/session-*.json, one JSON document with .messages", "the step's stream-json transcript (JSON lines) under ~/.prodigy/logs/<repo>/<job>/<item>/; the seeds' placeholder paths are read as the record's json_log_location", "DESIGN.md state on disk: claude step transcripts are saved by the engine"},
	{"stats-temporal", "`dlq stats` output includes a temporal distribution", "`dlq stats` shows the oldest and newest item (the storage seed's statistics shape); the per-hour distribution is `dlq analyze`'s temporal_distribution", "session-and-dlq-storage.md's statistics JSON has no temporal field"},
	{"dlq-show", "`dlq show <job_id>`: statistics (storage seed) or the failed items (spec 138)", "`dlq show [JOB_ID]` prints both: the statistics, then the items; --json is the statistics object", "the two seeds disagree; showing both satisfies each"},
	{"error-signature", "spec 138: a 16-hex SHA-256 of the message", "`<ErrorType>::<normalised message>` (numbers, paths, file names, hex ids removed)", "DESIGN.md DLQ records: signatures must group similar failures, which a hash of the raw message cannot"},
	{"error-types", "spec 138's sketch: PermissionError, CommandFailed{command, exit_code: None}", "the storage seed's eight variants; a permission failure is CommandFailed/Unknown with manual_review_required", "DESIGN.md: records follow the seeds' JSON exactly (session-and-dlq-storage.md's enum)"},
	{"resume-include-dlq", "`prodigy resume <job_id>  # include_dlq_items: true by default`", "resume re-runs DLQ items only with --include-dlq; `dlq retry` is the redrive", "DESIGN.md command line: resume JOB_ID [--include-dlq]"},
	{"dlq-root", "session-and-dlq-storage.md: ~/.prodigy/state/{base}/mapreduce/dlq/{job_id}/", "~/.prodigy/dlq/{repo}/{job_id}/mapreduce/dlq/{job_id}/ (the guide's layout)", "DESIGN.md state on disk"},
	{"cleanup-recipe", "spec 136 manual test: chmod 000 an untracked file in the agent worktree", "as root chmod 000 stops no deletion; the suite makes the file immutable (chattr +i) instead", "the test runs as root in CI containers"},
	{"backoff-cap", "backoff-strategies.md's timeout example: 10s + 10s + 20s + 30s + 50s = 120s with the 30s max_delay default", "every wait is capped at max_delay: 10s + 10s + 20s + 30s + 30s = 100s (120s with max_delay ≥ 50s)", "DESIGN.md attempts and backoff: the cap always holds (the seed's own rule)"},
	{"confirmations", "`dlq clear my-workflow` prompts for confirmation", "it prompts on stderr and reads stdin; the suite answers y (no answer is exit 2, nothing deleted)", "DESIGN.md: exit 2 when nothing ran"},
	{"empty-answers", "(not stated)", "an empty store, a job without records, a --filter or --signature that selects nothing: exit 0 and \"no records\"; usage errors exit 2", "issue 29: answer like a listing"},
}

func seedDiff(t *testing.T, name string) seedDifference {
	t.Helper()
	for _, d := range seedDifferences {
		if d.Name == name {
			return d
		}
	}
	t.Fatalf("no intentional difference named %q", name)
	return seedDifference{}
}

// TestSeedDifferencesAreInTheREADME: every intentional difference is a row
// of README.md's "Differences from Prodigy" table, by name.
func TestSeedDifferencesAreInTheREADME(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	i := strings.Index(readme, "## Differences from Prodigy")
	if i < 0 {
		t.Fatal(`README.md has no "## Differences from Prodigy" section`)
	}
	section := readme[i:]
	if j := strings.Index(section[3:], "\n## "); j >= 0 {
		section = section[:j+3]
	}
	for _, d := range seedDifferences {
		if !strings.Contains(section, "| `"+d.Name+"` |") {
			t.Errorf("README's differences table has no row | `%s` |", d.Name)
		}
	}
}

// seedEnv is a real-binary environment for the seeds' commands: HOME is a
// temp directory (so ~/.prodigy is the default state directory the guide
// names), `prodigy-action` and `prodigy` on PATH run this test binary as
// the CLI, and a Claude stand-in decides per item.
type seedEnv struct {
	t               *testing.T
	home, repo, bin string
	claude, calls   string
	env             []string
}

// seedClaude is the Claude stand-in of the guide's job: item-123 fails
// like the guide's example (cargo test, exit 101), item-456 fails with a
// permission error (manual review, not eligible), every other item
// commits a file and succeeds. Every prompt is appended to $SEED_CALLS.
const seedClaude = `prompt="${@: -1}"
echo "$prompt" >> "$SEED_CALLS"
case "$prompt" in
  *item-123*)
    echo '{"type":"assistant","message":{"content":[{"type":"text","text":"running cargo test"}]}}'
    echo '{"type":"result","subtype":"error_during_execution","is_error":true,"result":"cargo test failed with exit code 101"}'
    exit 101 ;;
  *item-456*)
    echo '{"type":"result","subtype":"error_during_execution","is_error":true,"result":"permission denied writing src/lib.rs"}'
    exit 1 ;;
  *fix-validation-error*)
    echo '{"type":"result","subtype":"success","is_error":false,"result":"fixed"}' ;;
  *)
    echo "$prompt" > "out-$(date +%s%N).txt" && git add -A && git commit -qm processed
    echo '{"type":"result","subtype":"success","is_error":false,"result":"ok"}' ;;
esac
`

func newSeedEnv(t *testing.T, files map[string]string) *seedEnv {
	t.Helper()
	e := &seedEnv{t: t, home: t.TempDir(), bin: t.TempDir()}
	// The repository is named "prodigy", as in the guide's paths.
	r := cliRepo(t, files)
	e.repo = filepath.Join(filepath.Dir(r), "prodigy")
	if err := os.Rename(r, e.repo); err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"prodigy-action", "prodigy"} {
		wrapper := fmt.Sprintf("#!/bin/sh\nPRODIGY_ACTION_TEST_MAIN=1 exec %q \"$@\"\n", exe)
		if err := os.WriteFile(filepath.Join(e.bin, name), []byte(wrapper), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	e.claude = filepath.Join(e.bin, "claude-stand-in")
	if err := os.WriteFile(e.claude, []byte("#!/usr/bin/env bash\n"+seedClaude), 0o755); err != nil {
		t.Fatal(err)
	}
	e.calls = filepath.Join(t.TempDir(), "calls")
	gitconfig := "[user]\n\tname = seed\n\temail = seed@example.invalid\n"
	if err := os.WriteFile(filepath.Join(e.home, ".gitconfig"), []byte(gitconfig), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch {
		case k == "HOME" || k == "PATH" || strings.HasPrefix(k, "PRODIGY_") || strings.HasPrefix(k, "GIT_"):
			continue
		}
		e.env = append(e.env, kv)
	}
	e.env = append(e.env, "HOME="+e.home, "PATH="+e.bin+":"+os.Getenv("PATH"),
		"PRODIGY_CLAUDE_COMMAND="+e.claude, "SEED_CALLS="+e.calls)
	return e
}

// sh runs one command line in a real bash in the repository, with stdin;
// it returns the exit code, stdout and stderr.
func (e *seedEnv) sh(stdin, line string) (int, string, string) {
	e.t.Helper()
	cmd := exec.Command("bash", "-o", "pipefail", "-c", line)
	cmd.Dir, cmd.Env = e.repo, e.env
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		e.t.Fatalf("%s: %v", line, err)
	}
	return code, out.String(), errb.String()
}

// record reads one DLQ record of the guide's layout.
func (e *seedEnv) record(job, item string) dlq.DeadLetteredItem {
	e.t.Helper()
	p := filepath.Join(e.home, ".prodigy", "dlq", "prodigy", job, "mapreduce", "dlq", job, "items", item+".json")
	b, err := os.ReadFile(p)
	if err != nil {
		e.t.Fatal(err)
	}
	var d dlq.DeadLetteredItem
	if err := json.Unmarshal(b, &d); err != nil {
		e.t.Fatalf("%s: %v", p, err)
	}
	return d
}

// checkHistory: every record's failure_count is the length of its
// failure_history, whose attempt numbers are 1, 2, … in order.
func (e *seedEnv) checkHistory(job string) {
	e.t.Helper()
	dir := filepath.Join(e.home, ".prodigy", "dlq", "prodigy", job, "mapreduce", "dlq", job, "items")
	files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	for _, f := range files {
		d := e.record(job, strings.TrimSuffix(filepath.Base(f), ".json"))
		if int(d.FailureCount) != len(d.FailureHistory) {
			e.t.Errorf("%s: failure_count %d, %d history entries", d.ItemID, d.FailureCount, len(d.FailureHistory))
		}
		for i, h := range d.FailureHistory {
			if int(h.AttemptNumber) != i+1 {
				e.t.Errorf("%s: history entry %d has attempt_number %d", d.ItemID, i, h.AttemptNumber)
			}
		}
	}
}

// guideWorkflow is the dlq-guide's "Integration with MapReduce" example,
// read from the seed, with map.id_field added (difference item-ids).
func guideWorkflow(t *testing.T) (asWritten, withIDs string) {
	t.Helper()
	blocks := plainYAMLBlocks(readSeed(t, "dlq-guide.md"))
	if len(blocks) != 1 || !strings.Contains(blocks[0].Body, "name: my-workflow") {
		t.Fatalf("dlq-guide.md: want its one workflow example (name: my-workflow), found %d YAML blocks", len(blocks))
	}
	asWritten = blocks[0].Body + "\n"
	const anchor = "  json_path: \"$.items[*]\"\n"
	if !strings.Contains(asWritten, anchor) {
		t.Fatalf("the guide's workflow has no %q line to add id_field after:\n%s", anchor, asWritten)
	}
	withIDs = strings.Replace(asWritten, anchor, anchor+"  id_field: id # "+seedDiff(t, "item-ids").Name+"\n", 1)
	return asWritten, withIDs
}

const guideItems = `{"items": [
  {"id": "item-123", "file": "src/main.rs", "priority": 5},
  {"id": "item-456", "file": "src/lib.rs", "priority": 2},
  {"id": "item-789", "file": "src/util.rs", "priority": 7}
]}`

// seedCheck is what the suite expects of one seed command: its exit code,
// text its output (stdout then stderr) must and must not contain, and an
// optional check of files it wrote. A command found in the seed without a
// check, or a check whose command is no longer in the seed, fails the
// suite: the seed is the list.
type seedCheck struct {
	code  int
	stdin string
	has   []string
	not   []string
	after func(t *testing.T, e *seedEnv, out string)
}

// readSeedCommand substitutes the named differences into a seed command:
// binary-name, job-ids, claude-log.
func readSeedCommand(line, job, logPath string) string {
	line = regexp.MustCompile(`(^|\$\(|\|\s*)prodigy `).ReplaceAllString(line, "${1}prodigy-action ")
	line = strings.NewReplacer("<workflow_id>", job, "<job_id>", job).Replace(line)
	for _, placeholder := range []string{"/path/to/claude-session.json", "/path/to/session.json", "~/.local/state/claude/logs/session-xyz.json"} {
		line = strings.ReplaceAll(line, placeholder, logPath)
	}
	return line
}

// TestSeedDLQGuideCommandsRunAsWritten runs every command example of
// dlq-guide.md, session-and-dlq-storage.md and spec-138-dlq-integration.md
// in document order, through the real binary in a real bash, against jobs
// of the guide's own workflow that put item-123 and item-456 in the DLQ,
// and checks that each shows what the guide says it shows.
func TestSeedDLQGuideCommandsRunAsWritten(t *testing.T) {
	t.Parallel()
	const job = "mapreduce-1234567890"
	e := newSeedEnv(t, map[string]string{"items.json": guideItems})
	asWritten, withIDs := guideWorkflow(t)
	wfDir := t.TempDir()
	seedWF, jobWF := filepath.Join(wfDir, "seed.yml"), filepath.Join(wfDir, "workflow.yml")
	if err := os.WriteFile(seedWF, []byte(asWritten), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(jobWF, []byte(withIDs), 0o644); err != nil {
		t.Fatal(err)
	}
	// The guide's workflow validates as written.
	if code, out, errOut := e.sh("", "prodigy-action validate "+seedWF); code != 0 {
		t.Fatalf("validate the guide's workflow: exit %d\n%s%s", code, out, errOut)
	}
	// Two jobs (difference job-ids); the second is the newest.
	for _, id := range []string{"my-workflow", job} {
		code, out, errOut := e.sh("", "prodigy-action run "+jobWF+" --job-id "+id+" --json")
		if code != 0 {
			t.Fatalf("run %s: exit %d\n%s%s", id, code, out, errOut)
		}
		var res struct {
			Successful int `json:"successful"`
			DLQCount   int `json:"dlq_count"`
		}
		if err := json.Unmarshal([]byte(out), &res); err != nil || res.Successful != 1 || res.DLQCount != 2 {
			t.Fatalf("run %s: %v %s\n%s", id, err, out, errOut)
		}
	}
	rec := e.record(job, "item-123")
	if rec.FailureHistory[0].JSONLogLocation == nil {
		t.Fatalf("item-123 has no json_log_location: %+v", rec.FailureHistory[0])
	}
	logPath := *rec.FailureHistory[0].JSONLogLocation
	if !strings.HasPrefix(logPath, filepath.Join(e.home, ".prodigy", "logs", "prodigy", job)) {
		t.Errorf("json_log_location %s is not under ~/.prodigy/logs/prodigy/%s (difference %s)", logPath, job, seedDiff(t, "claude-log").Name)
	}
	var data map[string]any
	if err := json.Unmarshal(rec.ItemData, &data); err != nil || data["file"] != "src/main.rs" || data["priority"] != 5.0 || rec.ErrorSignature == "" ||
		rec.WorktreeArtifacts == nil || rec.WorktreeArtifacts.WorktreePath == "" || !rec.ReprocessEligible {
		t.Errorf("item-123 record lacks what spec 138 requires (item data, signature, worktree path, eligible): %+v", rec)
	}
	if et := rec.FailureHistory[0].ErrorType; et.Kind != dlq.CommandFailed || et.ExitCode != 101 {
		t.Errorf("item-123 error_type = %+v, want the guide's CommandFailed{exit_code: 101}", et)
	}
	if d := e.record(job, "item-456"); d.ReprocessEligible || !d.ManualReviewRequired {
		t.Errorf("item-456 (permission denied) eligible=%v manual=%v, want a manual-review record", d.ReprocessEligible, d.ManualReviewRequired)
	}

	inspected := []string{`"item_id": "item-123"`, `"item_data"`, `"failure_history"`, `"error_message"`, `"stack_trace"`, `"json_log_location"`, `"worktree_artifacts"`, `"CommandFailed"`}
	fileHas := func(name string, parts ...string) func(*testing.T, *seedEnv, string) {
		return func(t *testing.T, e *seedEnv, _ string) {
			b, err := os.ReadFile(filepath.Join(e.repo, name))
			if err != nil {
				t.Errorf("%s not written: %v", name, err)
				return
			}
			for _, p := range parts {
				if !strings.Contains(string(b), p) {
					t.Errorf("%s lacks %q:\n%s", name, p, b)
				}
			}
		}
	}
	historyExact := func(t *testing.T, e *seedEnv, _ string) { e.checkHistory(job) }
	checks := map[string]seedCheck{
		// dlq-guide.md: List
		"prodigy dlq list": {has: []string{"item-123", "item-456", "job " + job + " (repo prodigy): the newest", "`latest`"}, not: []string{"item-789"}},
		"prodigy dlq list --job-id mapreduce-1234567890":             {has: []string{"item-123", "item-456"}, not: []string{"item-789"}},
		"prodigy dlq list --eligible":                                {has: []string{"item-123"}, not: []string{"item-456"}},
		"prodigy dlq list --limit 10":                                {has: []string{"item-123", "item-456"}},
		"prodigy dlq inspect item-123":                               {has: inspected},
		"prodigy dlq inspect item-123 --job-id mapreduce-1234567890": {has: inspected},
		// Analyze: pattern groups, error distribution, temporal distribution.
		"prodigy dlq analyze":                               {has: []string{"Pattern groups", "Error distribution", "Temporal distribution", "item-123"}},
		"prodigy dlq analyze --job-id mapreduce-1234567890": {has: []string{"Pattern groups", "Error distribution", "Temporal distribution"}},
		"prodigy dlq analyze --export analysis.json":        {has: []string{"analysis.json"}, after: fileHas("analysis.json", `"pattern_groups"`, `"error_distribution"`, `"temporal_distribution"`)},
		// Retry: eligible only unless --force; successes leave, failures stay with history extended.
		"prodigy dlq retry <workflow_id>":                               {has: []string{"redriving 1 DLQ item(s)"}, after: historyExact},
		"prodigy dlq retry <workflow_id> --parallel 10":                 {has: []string{"10 in parallel"}},
		"prodigy dlq retry <workflow_id> --filter 'item.priority >= 5'": {has: []string{"redriving 1 DLQ item(s)"}},
		"prodigy dlq retry <workflow_id> --max-retries 2":               {has: []string{"2 attempt(s) each"}},
		"prodigy dlq retry <workflow_id> --force":                       {has: []string{"redriving 2 DLQ item(s)"}, after: historyExact},
		// Export
		"prodigy dlq export dlq-items.json":                            {has: []string{"exported 2 items"}, after: fileHas("dlq-items.json", `"item_id": "item-123"`, `"item_id": "item-456"`)},
		"prodigy dlq export dlq-items.csv --format csv":                {has: []string{"exported 2 items"}, after: fileHas("dlq-items.csv", "item_id,", "item-123", "item-456")},
		"prodigy dlq export output.json --job-id mapreduce-1234567890": {has: []string{"exported 2 items"}, after: fileHas("output.json", "item-123")},
		// Stats: total, by error type, average retry count, eligible vs manual review (difference stats-temporal).
		"prodigy dlq stats":                           {has: []string{"Total items:", "By error type", "Average failure count", "Eligible for reprocess:", "Requiring manual review:", "Oldest item"}},
		"prodigy dlq stats --workflow-id my-workflow": {has: []string{"Job:", "my-workflow", "Total items:"}},
		// Clear (difference confirmations) and purge.
		"prodigy dlq clear my-workflow":                                        {stdin: "y\n", has: []string{"Delete all 2 items", "cleared 2 items of job my-workflow"}},
		"prodigy dlq clear my-workflow --yes":                                  {has: []string{"nothing to clear"}},
		"prodigy dlq purge --older-than-days 30":                               {has: []string{"nothing to purge"}},
		"prodigy dlq purge --older-than-days 30 --job-id mapreduce-1234567890": {has: []string{"nothing to purge"}},
		"prodigy dlq purge --older-than-days 30 --yes":                         {has: []string{"nothing to purge"}},
		// Debugging: the Claude log of the first attempt (difference claude-log).
		"cat $(prodigy dlq inspect item-123 | jq -r '.failure_history[0].json_log_location')": {has: []string{`"type":"result"`, "cargo test failed"}},
		"cat /path/to/session.json | jq '.'":                                                  {has: []string{`"type": "result"`}},
		"cat /path/to/claude-session.json | jq '.messages[-3:]'":                              {has: []string{"null"}},
		"prodigy dlq retry mapreduce-1234567890":                                              {has: []string{"redriving 1 DLQ item(s)"}, after: historyExact},
		// Direct file access: the guide's layout under ~/.prodigy.
		"ls ~/.prodigy/dlq/prodigy/mapreduce-1234567890/mapreduce/dlq/mapreduce-1234567890/items/":                    {has: []string{"item-123.json", "item-456.json"}, not: []string{"item-789"}},
		"cat ~/.prodigy/dlq/prodigy/mapreduce-1234567890/mapreduce/dlq/mapreduce-1234567890/items/item-123.json | jq": {has: []string{`"item_id": "item-123"`}},
		"jq '.item_count' ~/.prodigy/dlq/prodigy/mapreduce-1234567890/mapreduce/dlq/mapreduce-1234567890/index.json":  {has: []string{"2"}},
		// session-and-dlq-storage.md (difference dlq-show).
		"prodigy dlq show <job_id>":                                             {has: []string{"Total items:", "Eligible for reprocess:", "Requiring manual review:", "Error categories", "Items (newest last attempt first):", "item-123", "item-456"}},
		"prodigy dlq retry <job_id>":                                            {has: []string{"redriving 1 DLQ item(s)"}},
		"prodigy dlq retry <job_id> --max-parallel 5 --dry-run":                 {has: []string{"item-123", "dry run: 1 item(s) would be retried"}, not: []string{"item-456"}},
		"cat ~/.local/state/claude/logs/session-xyz.json | jq '.messages[-3:]'": {has: []string{"null"}},
		// spec-138-dlq-integration.md (difference resume-include-dlq).
		"prodigy resume <job_id>  # include_dlq_items: true by default": {has: []string{job, "nothing to resume", "--include-dlq"}, after: resumeIncludeDLQ},
	}
	used := map[string]bool{}
	_ = seedDiff(t, "resume-include-dlq")
	for _, doc := range []string{"dlq-guide.md", "session-and-dlq-storage.md", "spec-138-dlq-integration.md"} {
		cmds := seedCommands(readSeed(t, doc))
		if len(cmds) == 0 {
			t.Fatalf("%s: no command examples found", doc)
		}
		for _, c := range cmds {
			ck, ok := checks[c]
			if !ok {
				t.Errorf("%s: command %q has no expectation in this suite", doc, c)
				continue
			}
			used[c] = true
			line := readSeedCommand(c, job, logPath)
			code, out, errOut := e.sh(ck.stdin, line)
			all := out + errOut
			if code != ck.code {
				t.Errorf("%s: %s\n  ran %s: exit %d, want %d\n%s", doc, c, line, code, ck.code, all)
				continue
			}
			for _, h := range ck.has {
				if !strings.Contains(all, h) {
					t.Errorf("%s: %s: output lacks %q:\n%s", doc, c, h, all)
				}
			}
			for _, n := range ck.not {
				if strings.Contains(out, n) {
					t.Errorf("%s: %s: stdout has %q:\n%s", doc, c, n, out)
				}
			}
			if ck.after != nil {
				ck.after(t, e, out)
			}
		}
	}
	var stale []string
	for c := range checks {
		if !used[c] {
			stale = append(stale, c)
		}
	}
	sort.Strings(stale)
	if len(stale) > 0 {
		t.Errorf("expectations for commands no seed has any more: %q", stale)
	}
	e.checkHistory(job)

	// Issue 27: the largest cluster `dlq analyze` shows may hold only
	// records that are not eligible; --signature says so, lists every
	// signature with eligible/total and says to add --force.
	perm := e.record(job, "item-456").ErrorSignature
	code, out, errOut := e.sh("", "prodigy-action dlq retry "+job+" --signature '"+perm+"'")
	if code != 0 || !strings.Contains(errOut, "none of them reprocess_eligible") || !strings.Contains(errOut, "add --force") ||
		!strings.Contains(errOut, fmt.Sprintf("%q 0/1", perm)) || !strings.Contains(errOut, fmt.Sprintf("%q 1/1", e.record(job, "item-123").ErrorSignature)) {
		t.Errorf("--signature of an ineligible cluster: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = e.sh("", "prodigy-action dlq retry "+job+" --signature '"+perm+"' --force --dry-run")
	if code != 0 || out != "rest\titem-456\n" {
		t.Errorf("--signature --force --dry-run: exit %d\n%q\n%s", code, out, errOut)
	}
}

// resumeIncludeDLQ: with --include-dlq (difference resume-include-dlq) a
// resume of the completed job runs its eligible DLQ items again: item-123
// is attempted again and its history grows by exactly those attempts.
func resumeIncludeDLQ(t *testing.T, e *seedEnv, _ string) {
	const job = "mapreduce-1234567890"
	calls := func() int {
		b, _ := os.ReadFile(e.calls)
		return strings.Count(string(b), "item-123")
	}
	before, hist := calls(), len(e.record(job, "item-123").FailureHistory)
	ineligible := strings.Count(mustRead(t, e.calls), "item-456")
	code, out, errOut := e.sh("", "prodigy-action resume "+job+" --include-dlq")
	if code != 0 {
		t.Fatalf("resume --include-dlq: exit %d\n%s%s", code, out, errOut)
	}
	ran := calls() - before
	if ran == 0 {
		t.Fatalf("resume --include-dlq did not run item-123:\n%s", errOut)
	}
	if got := len(e.record(job, "item-123").FailureHistory); got != hist+ran {
		t.Errorf("item-123 history %d → %d after %d attempts", hist, got, ran)
	}
	if n := strings.Count(mustRead(t, e.calls), "item-456"); n != ineligible {
		t.Errorf("resume --include-dlq ran item-456 (not eligible): %d → %d calls", ineligible, n)
	}
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// seedFragmentWorkflow embeds a seed's `retry_config:` fragment in a
// minimal workflow under map (where the seed's complete example puts its
// error_policy).
func seedFragmentWorkflow(fragment string) string {
	var b strings.Builder
	b.WriteString("name: seed-fragment\nmode: mapreduce\nmap:\n  input: items.json\n  agent_template:\n    - shell: \"true\"\n")
	for _, l := range strings.Split(strings.TrimRight(fragment, "\n"), "\n") {
		b.WriteString("  " + l + "\n")
	}
	return b.String()
}

var freeForm = map[string]bool{".item_data": true, ".error_categories": true}

var (
	behaviorRe = regexp.MustCompile(`Retry (\d+)(\+?): (max_delay|\d+(?:ms|s|m|h))`)
	formatsRe  = regexp.MustCompile(`Valid formats: (.*) Invalid formats: (.*)`)
	timeoutRe  = regexp.MustCompile(`Fibonacci backoff with initial_delay: (\S+)\s+Total delay could be: ([^=]+)= (\S+) of retries`)
)

// TestSeedBackoffExamples validates every YAML example of
// backoff-strategies.md and checks the schedule each one produces against
// the seed's own "Behavior:" lines (the first such list after the block),
// the jitter and cap rule of "How fields interact", the humantime format
// list, and runs the complete MapReduce example through the real binary.
func TestSeedBackoffExamples(t *testing.T) {
	t.Parallel()
	text := readSeed(t, "backoff-strategies.md")
	blocks := plainYAMLBlocks(text)
	if len(blocks) != 11 {
		t.Fatalf("backoff-strategies.md: %d YAML examples, want the 11 this suite checks (a change to the seed must reach the suite)", len(blocks))
	}
	lines := strings.Split(text, "\n")
	var complete, fields string
	for _, b := range blocks {
		if strings.HasPrefix(b.Body, "name: ") {
			complete = b.Body
			continue
		}
		if strings.Contains(b.Body, "# Maximum retry attempts") {
			fields = b.Body
			continue
		}
		wf, err := config.Parse(fmt.Sprintf("backoff-strategies.md:%d", b.Line), []byte(seedFragmentWorkflow(b.Body)))
		if err != nil {
			t.Errorf("example at line %d does not validate: %v\n%s", b.Line, err, b.Body)
			continue
		}
		pol, err := validate.RetryPolicy(wf.ErrorPolicy.Retry)
		if err != nil {
			t.Errorf("example at line %d: %v", b.Line, err)
			continue
		}
		// The behaviour list that follows the block (for a pair of
		// forms, the one after the second).
		rest := strings.Join(lines[b.Line:], "\n")
		j := strings.Index(rest, "Behavior")
		if j < 0 {
			t.Fatalf("no behaviour list after the example at line %d", b.Line)
		}
		para := rest[j:]
		if k := strings.Index(para, "\n\n"); k >= 0 {
			para = para[:k]
		}
		want := behaviorRe.FindAllStringSubmatch(para, -1)
		if len(want) < 3 {
			t.Fatalf("behaviour list after line %d has %d retries: %q", b.Line, len(want), para)
		}
		// The fixed section's list is the simple form's (2s); its explicit
		// form says `delay: 5s`, which is what that example must do.
		explicitFixed := strings.Contains(b.Body, "delay: 5s")
		for _, m := range want {
			k, _ := strconv.Atoi(m[1])
			var d time.Duration
			switch {
			case m[3] == "max_delay":
				d = pol.MaxDelay
			case explicitFixed:
				d = 5 * time.Second
			default:
				d, _ = time.ParseDuration(m[3])
			}
			ks := []int{k}
			if m[2] == "+" {
				ks = append(ks, k+1, k+5)
			}
			for _, k := range ks {
				if got := pol.Wait(k, 0.5); got != d {
					t.Errorf("example at line %d: retry %d waits %s, the seed says %s\n%s", b.Line, k, got, d, b.Body)
				}
			}
		}
	}

	// RetryConfig fields: defaults and how they interact (cap, then ± jitter, cap holds).
	if fields == "" || complete == "" {
		t.Fatal("backoff-strategies.md lost its RetryConfig fields example or its complete MapReduce example")
	}
	wf, err := config.Parse("fields", []byte(seedFragmentWorkflow(fields)))
	if err != nil {
		t.Fatalf("RetryConfig fields example: %v", err)
	}
	pol, err := validate.RetryPolicy(wf.ErrorPolicy.Retry)
	if err != nil {
		t.Fatal(err)
	}
	if pol.Attempts != 3 || pol.MaxDelay != 30*time.Second || !pol.Jitter || pol.JitterFactor != 0.3 {
		t.Errorf("fields example policy = %+v", pol)
	}
	for k := 1; k <= 8; k++ {
		base := min(time.Second<<(k-1), 30*time.Second)
		lo, hi := pol.Wait(k, 0), pol.Wait(k, 0.999999)
		if lo != time.Duration(float64(base)*0.7) || hi > 30*time.Second || hi < min(time.Duration(float64(base)*1.29), 30*time.Second) {
			t.Errorf("retry %d: jitter range [%s, %s] around %s (±30%%, capped at 30s)", k, lo, hi, base)
		}
	}
	// Defaults: exponential base 2 from 1s, capped at 30s, no jitter.
	wf, err = config.Parse("defaults", []byte(seedFragmentWorkflow("retry_config:\n  attempts: 8\n")))
	if err != nil {
		t.Fatal(err)
	}
	pol, _ = validate.RetryPolicy(wf.ErrorPolicy.Retry)
	if got := fmt.Sprint(pol.Schedule()); got != "[1s 2s 4s 8s 16s 30s 30s]" || pol.Jitter {
		t.Errorf("default schedule %s jitter %v", got, pol.Jitter)
	}
	// Custom edge case: an empty delays array waits max_delay every time.
	wf, err = config.Parse("custom-empty", []byte(seedFragmentWorkflow("retry_config:\n  attempts: 3\n  max_delay: 20s\n  backoff:\n    custom:\n      delays: []\n")))
	if err != nil {
		t.Fatal(err)
	}
	pol, _ = validate.RetryPolicy(wf.ErrorPolicy.Retry)
	if got := fmt.Sprint(pol.Schedule()); got != "[20s 20s]" {
		t.Errorf("custom with no delays: %s, want max_delay each time", got)
	}

	// Humantime formats: the valid ones parse, the invalid ones are config errors that say why.
	m := formatsRe.FindStringSubmatch(text)
	if m == nil {
		t.Fatal("backoff-strategies.md lost its humantime format list")
	}
	for _, v := range strings.Split(m[1], ", ") {
		if _, err := config.Parse("valid", []byte(seedFragmentWorkflow("retry_config:\n  initial_delay: "+v+"\n"))); err != nil {
			t.Errorf("valid format %q rejected: %v", v, err)
		}
	}
	for _, v := range strings.Split(m[2], ", ") {
		_, err := config.Parse("invalid", []byte(seedFragmentWorkflow("retry_config:\n  initial_delay: "+v+"\n")))
		if err == nil || !strings.Contains(err.Error(), "initial_delay") {
			t.Errorf("invalid format %q: %v, want an error naming initial_delay", v, err)
		}
	}

	// Timeout interaction: the seed sums 10s+10s+20s+30s+50s = 120s, past
	// its own 30s max_delay default; the cap holds (difference backoff-cap).
	m = timeoutRe.FindStringSubmatch(strings.Join(strings.Fields(text), " "))
	if m == nil {
		t.Fatal("backoff-strategies.md lost its timeout-interaction example")
	}
	_ = seedDiff(t, "backoff-cap")
	for _, tc := range []struct{ maxDelay, want string }{{"", "100s"}, {"max_delay: 60s\n  ", m[3]}} {
		wf, err := config.Parse("timeout", []byte(seedFragmentWorkflow("retry_config:\n  "+tc.maxDelay+"attempts: 6\n  initial_delay: "+m[1]+"\n  backoff: fibonacci\n")))
		if err != nil {
			t.Fatal(err)
		}
		pol, _ := validate.RetryPolicy(wf.ErrorPolicy.Retry)
		var sum time.Duration
		for _, d := range pol.Schedule() {
			sum += d
		}
		if want, _ := time.ParseDuration(tc.want); sum != want {
			t.Errorf("fibonacci from %s over 5 retries (%q): total %s, want %s (%s)", m[1], tc.maxDelay, sum, want, m[2])
		}
	}

	// The complete MapReduce example validates and runs as written: its
	// `validate` command does not exist here, so the step fails and its
	// on_failure Claude handler fixes it; every item succeeds.
	e := newSeedEnv(t, map[string]string{"items.json": `{"items": [{"id": "a", "output": "x"}, {"id": "b", "output": "y"}]}`})
	wfPath := filepath.Join(t.TempDir(), "complete.yml")
	if err := os.WriteFile(wfPath, []byte(complete+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := e.sh("", "prodigy-action validate "+wfPath); code != 0 {
		t.Fatalf("validate the complete example: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut := e.sh("", "prodigy-action run "+wfPath+" --json")
	var res struct {
		Successful, Failed int
	}
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || res.Successful != 2 || res.Failed != 0 {
		t.Fatalf("run the complete example: exit %d\n%s%s", code, out, errOut)
	}
	calls := mustRead(t, e.calls)
	if strings.Count(calls, "/fix-validation-error") != 2 || strings.Count(calls, "/process-item 'a'") != 1 || strings.Count(calls, "/process-item 'b'") != 1 {
		t.Errorf("claude calls:\n%s", calls)
	}
}

// jsonKind names the JSON type of v for shape comparisons.
func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case map[string]any:
		return "object"
	case []any:
		return "array"
	case string:
		return "string"
	case float64:
		return "number"
	case bool:
		return "bool"
	}
	return fmt.Sprintf("%T", v)
}

// shapeDiff lists where ours lacks a field of seed or gives it another
// JSON type. A seed null accepts any value; optional (Option<…>) fields
// may be null in ours; arrays compare their first elements; the fields in
// freeForm (item data, maps keyed by signature) compare their type only.
func shapeDiff(seed, ours any, path string, optional map[string]bool) []string {
	if seed == nil {
		return nil
	}
	if ours == nil && optional[path] {
		return nil
	}
	if jsonKind(seed) != jsonKind(ours) {
		return []string{fmt.Sprintf("%s: seed %s, ours %s", path, jsonKind(seed), jsonKind(ours))}
	}
	if freeForm[path] {
		return nil // user data or counts by dynamic key: the type is the shape
	}
	var out []string
	switch s := seed.(type) {
	case map[string]any:
		o := ours.(map[string]any)
		for k, sv := range s {
			ov, ok := o[k]
			if !ok {
				out = append(out, path+"."+k+": missing")
				continue
			}
			out = append(out, shapeDiff(sv, ov, path+"."+k, optional)...)
		}
	case []any:
		o := ours.([]any)
		if len(s) > 0 && len(o) > 0 {
			out = append(out, shapeDiff(s[0], o[0], path+"[]", optional)...)
		}
	}
	return out
}

func decodeJSON(t *testing.T, what, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("%s: %v\n%s", what, err, s)
	}
	return v
}

// TestSeedStorageShapes: every field and error type of
// session-and-dlq-storage.md (and the record, failure detail and index
// examples of dlq-guide.md) appears in the files a real job writes, with
// the seed's names and JSON types.
func TestSeedStorageShapes(t *testing.T) {
	t.Parallel()
	storage := readSeed(t, "session-and-dlq-storage.md")
	guide := readSeed(t, "dlq-guide.md")
	sj, gj := seedJSONBlocks(storage), seedJSONBlocks(guide)
	if len(sj) != 4 || len(gj) != 3 {
		t.Fatalf("JSON examples: %d in the storage seed (want 4: session, mapreduce_data, item, statistics), %d in the guide (want 3: item, failure detail, index)", len(sj), len(gj))
	}
	// A real job: a timeout, a failed command (exit 101), a missing commit.
	repo := cliRepo(t, map[string]string{"items.json": `[{"id": "t"}, {"id": "c"}, {"id": "n"}, {"id": "ok"}]`})
	wf := clitest.Workflow(t, `name: shapes
map:
  input: items.json
  id_field: id
  agent_template:
    - shell: |
        case "${item.id}" in
          t) sleep 10 ;;
          c) echo "cargo test failed with exit code 101" >&2; exit 101 ;;
          ok) echo ok > ok.txt && git add ok.txt && git commit -qm ok ;;
        esac
      timeout: 1
      commit_required: true
`)
	home := t.TempDir()
	if code, out, errOut := runCLI(t, home, "run", wf, "--repo", repo, "--job-id", "shapes", "--json"); code != 0 || !strings.Contains(out, `"dlq_count": 3`) {
		t.Fatalf("run: exit %d\n%s\n%s", code, out, errOut)
	}
	itemFile := func(id string) any {
		b, err := os.ReadFile(filepath.Join(home, "dlq", "repo", "shapes", "mapreduce", "dlq", "shapes", "items", id+".json"))
		if err != nil {
			t.Fatal(err)
		}
		return decodeJSON(t, id, string(b))
	}
	optional := map[string]bool{
		".failure_history[].stack_trace": true, ".failure_history[].json_log_location": true, // Option<String> in the seed's struct
		".worktree_artifacts.uncommitted_changes": true, ".worktree_artifacts.error_logs": true,
		".stack_trace": true, ".json_log_location": true,
	}
	check := func(what string, seed, ours any) {
		t.Helper()
		for _, d := range shapeDiff(seed, ours, "", optional) {
			t.Errorf("%s: %s", what, d)
		}
	}
	timeout, failed := itemFile("t"), itemFile("c")
	// The storage seed's item has a Timeout; the guide's a CommandFailed.
	check("storage seed DLQ item vs the Timeout record", decodeJSON(t, "storage item", sj[2].Body), timeout)
	check("guide DLQ item vs the CommandFailed record", decodeJSON(t, "guide item", gj[0].Body), failed)
	check("guide FailureDetail vs a failure_history entry", decodeJSON(t, "guide detail", gj[1].Body), failed.(map[string]any)["failure_history"].([]any)[0])
	if et := timeout.(map[string]any)["failure_history"].([]any)[0].(map[string]any)["error_type"]; et != "Timeout" {
		t.Errorf(`Timeout record error_type = %v, want "Timeout"`, et)
	}
	if et := failed.(map[string]any)["failure_history"].([]any)[0].(map[string]any)["error_type"]; fmt.Sprint(et) != "map[CommandFailed:map[exit_code:101]]" {
		t.Errorf(`CommandFailed record error_type = %v, want {"CommandFailed":{"exit_code":101}}`, et)
	}
	idx, err := os.ReadFile(filepath.Join(home, "dlq", "repo", "shapes", "mapreduce", "dlq", "shapes", "index.json"))
	if err != nil {
		t.Fatal(err)
	}
	check("guide index.json", decodeJSON(t, "guide index", gj[2].Body), decodeJSON(t, "index.json", string(idx)))

	// Statistics: `dlq show --json` (the storage seed's command) carries every field.
	code, out, errOut := runCLI(t, home, "dlq", "show", "shapes", "--json")
	if code != 0 {
		t.Fatalf("dlq show --json: exit %d %s", code, errOut)
	}
	stats := decodeJSON(t, "stats", out)
	check("storage seed statistics vs dlq show --json", decodeJSON(t, "seed stats", sj[3].Body), stats)
	if s := stats.(map[string]any); s["total_items"] != 3.0 || s["eligible_for_reprocess"] == nil {
		t.Errorf("stats = %v", s)
	}

	// Session file: the seed's fields; a MapReduce session fills mapreduce_data.
	sessions, _ := filepath.Glob(filepath.Join(home, "sessions", "*.json"))
	if len(sessions) != 1 {
		t.Fatalf("session files: %v", sessions)
	}
	sess := decodeJSON(t, "session", mustRead(t, sessions[0])).(map[string]any)
	seedSess := decodeJSON(t, "seed session", sj[0].Body).(map[string]any)
	delete(seedSess, "workflow_data") // the seed's example is a Workflow session; ours are MapReduce sessions
	check("storage seed session file", seedSess, sess)
	check("storage seed mapreduce_data", decodeJSON(t, "seed mapreduce_data", sj[1].Body), sess["mapreduce_data"])
	statuses := regexp.MustCompile("(?m)^\\| `(\\w+)` \\| ").FindAllStringSubmatch(storage, -1)
	var known []string
	for _, m := range statuses {
		known = append(known, m[1])
	}
	if !strings.Contains(strings.Join(known, " "), "Completed") || !slicesContains(known, fmt.Sprint(sess["status"])) {
		t.Errorf("session status %v is not one of the seed's %v", sess["status"], known)
	}

	// Error types: the seed's enum, in its order, is dlq.Kinds; each
	// encodes as the seed's JSON (unit variants as strings).
	var enum string
	for _, b := range fencedBlocks(storage) {
		if b.Lang == "rust" && strings.Contains(b.Body, "pub enum ErrorType") {
			enum = b.Body
		}
	}
	variants := regexp.MustCompile(`(?m)^\s+(\w+)(?: \{ (\w+): i32 \})?,$`).FindAllStringSubmatch(enum, -1)
	if len(variants) != len(dlq.Kinds) {
		t.Fatalf("the seed's ErrorType has %d variants, dlq.Kinds %d", len(variants), len(dlq.Kinds))
	}
	for i, v := range variants {
		if string(dlq.Kinds[i]) != v[1] {
			t.Errorf("variant %d: seed %s, ours %s", i, v[1], dlq.Kinds[i])
		}
		et := dlq.ErrorType{Kind: dlq.Kinds[i], ExitCode: 7}
		b, err := json.Marshal(et)
		want := `"` + v[1] + `"`
		if v[2] != "" {
			want = `{"` + v[1] + `":{"` + v[2] + `":7}}`
		}
		if err != nil || string(b) != want {
			t.Errorf("%s encodes as %s (%v), want %s", v[1], b, err, want)
		}
		if !strings.Contains(storage, "| `"+v[1]+"` |") {
			t.Errorf("the seed's error type table lacks %s", v[1])
		}
	}
	if d := itemFile("n").(map[string]any)["failure_history"].([]any)[0].(map[string]any)["error_type"]; d != "CommitValidationFailed" {
		t.Errorf("no-commit item error_type = %v, want CommitValidationFailed", d)
	}
}

func slicesContains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// TestSeedSpec136CleanupFailure runs spec 136's scenario through the real
// binary: an agent whose work and merge succeed but whose worktree cannot
// be removed (the seed's manual test, with chattr +i for root: difference
// cleanup-recipe) stays successful, the workflow completes, the cleanup
// failure is a warning, the agent_completed event carries cleanup_status,
// the DLQ has no record of it, the orphan registry has the path, and the
// seed's `prodigy worktree clean-orphaned` removes it once the cause is gone.
func TestSeedSpec136CleanupFailure(t *testing.T) {
	t.Parallel()
	spec := readSeed(t, "spec-136-cleanup-failure-handling.md")
	var recipe string
	for _, b := range fencedBlocks(spec) {
		if b.Lang == "bash" && strings.Contains(b.Body, "chmod 000") {
			recipe = b.Body
		}
	}
	if recipe == "" || !slicesContains(seedCommands(spec), "prodigy worktree clean-orphaned") {
		t.Fatal("spec 136 lost its manual-test recipe (chmod 000) or its `prodigy worktree clean-orphaned` command")
	}
	if out, err := exec.Command("chattr", "--help").CombinedOutput(); err != nil && !strings.Contains(string(out), "Usage") {
		t.Fatalf("chattr is needed for the %s difference: %v %s", seedDiff(t, "cleanup-recipe").Name, err, out)
	}
	e := newSeedEnv(t, map[string]string{"items.json": `[{"id": "item_9"}, {"id": "item_1"}]`})
	wf := filepath.Join(t.TempDir(), "wf.yml")
	reduceOut := filepath.Join(t.TempDir(), "reduce.txt")
	// The seed's recipe, in the agent's own worktree: an untracked file
	// nobody may delete (chmod 000 does not stop root; chattr +i does).
	body := `name: spec-136
mode: mapreduce
map:
  input: items.json
  id_field: id
  agent_template:
    - shell: |
        echo "${item.id}" > "done-${item.id}.txt" && git add . && git commit -qm "${item.id}"
        if [ "${item.id}" = item_9 ]; then
          touch untracked-file.txt && chmod 000 untracked-file.txt && chattr +i untracked-file.txt
        fi
reduce:
  - shell: echo "${map.successful}/${map.failed}" > ` + reduceOut + `
`
	if err := os.WriteFile(wf, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		m, _ := filepath.Glob(filepath.Join(e.home, ".prodigy", "worktrees", "*", "*", "*", "untracked-file.txt"))
		m2, _ := filepath.Glob(filepath.Join(e.home, ".prodigy", "worktrees", "*", "*", ".discarded-*", "untracked-file.txt"))
		for _, p := range append(m, m2...) {
			_ = exec.Command("chattr", "-i", p).Run()
		}
	})
	code, out, errOut := e.sh("", "prodigy-action run "+wf+" --job-id s136 --json")
	var res struct {
		Status            string `json:"status"`
		Successful        int    `json:"successful"`
		Failed            int    `json:"failed"`
		DLQCount          int    `json:"dlq_count"`
		OrphanedWorktrees []struct {
			Path   string `json:"path"`
			ItemID string `json:"item_id"`
			Error  string `json:"error"`
		} `json:"orphaned_worktrees"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil {
		t.Fatalf("run: exit %d\n%s%s", code, out, errOut)
	}
	if res.Status != "completed" || res.Successful != 2 || res.Failed != 0 || res.DLQCount != 0 {
		t.Errorf("spec 136: success is decided by work and merge only: %s", out)
	}
	if len(res.OrphanedWorktrees) != 1 || res.OrphanedWorktrees[0].Error == "" {
		t.Fatalf("orphaned worktrees: %+v", res.OrphanedWorktrees)
	}
	orphan := res.OrphanedWorktrees[0].Path
	if got := strings.TrimSpace(mustRead(t, reduceOut)); got != "2/0" {
		t.Errorf("reduce saw successful/failed = %s, want 2/0 (spec 136: reduce receives the correct agent results)", got)
	}
	if !strings.Contains(errOut, "WARN cleanup failed for agent") {
		t.Errorf("no WARN for the cleanup failure:\n%s", errOut)
	}
	events := mustRead(t, filepath.Join(e.home, ".prodigy", "events", "prodigy", "s136", "events.jsonl"))
	if !strings.Contains(events, `"cleanup_status":{"Failed":`) {
		t.Errorf("agent_completed lacks cleanup_status Failed:\n%s", events)
	}
	if files := gitOut(t, e.repo, "ls-tree", "-r", "--name-only", "prodigy/s136"); !strings.Contains(files, "done-item_9.txt") || !strings.Contains(files, "done-item_1.txt") {
		t.Errorf("work not merged despite the cleanup failure:\n%s", files)
	}
	// While the cause persists, the seed's command reports it and keeps
	// the registry entry (exit 1).
	code, out, errOut = e.sh("y\n", "prodigy worktree clean-orphaned")
	if code != 1 || !strings.Contains(out+errOut, orphan) || !strings.Contains(errOut, "could not remove") {
		t.Errorf("clean-orphaned with the cause present: exit %d\n%s%s", code, out, errOut)
	}
	m, _ := filepath.Glob(filepath.Join(orphan, "untracked-file.txt"))
	for _, p := range m {
		if err := exec.Command("chattr", "-i", p).Run(); err != nil {
			t.Fatal(err)
		}
	}
	for _, line := range []string{"prodigy-action worktree clean-orphaned --dry-run", "prodigy-action worktree clean-orphaned --yes"} {
		code, out, errOut = e.sh("", line)
		if code != 0 || !strings.Contains(out+errOut, orphan) {
			t.Errorf("%s: exit %d\n%s%s", line, code, out, errOut)
		}
	}
	if _, err := os.Stat(orphan); !os.IsNotExist(err) {
		t.Errorf("orphan %s still there after clean-orphaned --yes: %v", orphan, err)
	}
	if code, _, errOut := e.sh("", "prodigy-action worktree clean-orphaned --force"); code != 0 || !strings.Contains(errOut, "no orphaned worktrees") {
		t.Errorf("clean-orphaned --force (alias of --yes) after cleaning: exit %d %s", code, errOut)
	}
}

// customEnv is the job of the on_item_failure custom / step retry tests:
// "flaky" fails its step twice then succeeds (step retry), "handled"
// always fails and its custom handler succeeds, "unhandled" always fails
// and its handler fails too. Counters outside the repository count the
// step attempts; the handler appends what it sees to handled.log.
type customEnv struct {
	*seedEnv
	wf, counters, handled string
}

func newCustomEnv(t *testing.T, killAt string) *customEnv {
	t.Helper()
	c := &customEnv{seedEnv: newSeedEnv(t, map[string]string{"items.json": `[
  {"id": "flaky", "handler": "ok"},
  {"id": "handled", "handler": "ok"},
  {"id": "unhandled", "handler": "fail"}
]`})}
	dir := t.TempDir()
	c.counters, c.handled = filepath.Join(dir, "counters"), filepath.Join(dir, "handled.log")
	if err := os.Mkdir(c.counters, 0o755); err != nil {
		t.Fatal(err)
	}
	// killAt "step:<item>:<n>" kills the engine (kill -9 of the real
	// binary, the step's parent) at the item's n-th step attempt;
	// "handler:<item>" in that item's custom handler; each once. Items run
	// one at a time, in order: with two at once, a kill in one item's
	// handler could land before the other item's outcome was checkpointed,
	// and resume then runs that item's handler again (handlers run at
	// least once), which the counts below would not expect.
	c.wf = filepath.Join(dir, "wf.yml")
	body := fmt.Sprintf(`name: custom-handler
mode: mapreduce
map:
  input: items.json
  id_field: id
  max_parallel: 1
  agent_template:
    - shell: |
        f=%[1]s/${item.id}; n=$(( $(cat "$f" 2>/dev/null || echo 0) + 1 )); echo $n > "$f"
        if [ "%[3]s" = "step:${item.id}:$n" ] && [ ! -e %[1]s/killed ]; then touch %[1]s/killed; kill -9 $PPID; sleep 1; fi
        case "${item.id}" in
          flaky) [ $n -ge 3 ] || { echo "flaky failure $n" >&2; exit 3; } ;;
          *) echo "broken for good" >&2; exit 4 ;;
        esac
        echo ok > "out-${item.id}.txt" && git add . && git commit -qm "${item.id}"
      retry:
        attempts: 3
        backoff: fixed
        initial_delay: 10ms
  on_item_failure:
    custom:
      - shell: |
          echo "${item.id}|${error.type}|${attempt}|$PRODIGY_ITEM_ID|${error.message}|${error.step}" >> %[2]s
          if [ "%[3]s" = "handler:${item.id}" ] && [ ! -e %[1]s/killed ]; then touch %[1]s/killed; kill -9 $PPID; sleep 1; fi
          [ "${item.handler}" = ok ]
`, c.counters, c.handled, killAt)
	if err := os.WriteFile(c.wf, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return c
}

func (c *customEnv) count(item string) int {
	b, _ := os.ReadFile(filepath.Join(c.counters, item))
	n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return n
}

// customOutcome checks the final state of the custom-handler job cu: flaky
// merged (its step retried until it passed), handled skipped by its
// handler (no DLQ record), unhandled in the DLQ with one failure_history
// entry for its one failed attempt (the step's own retries are inside
// that attempt), and what each handler run saw. After a kill (killed) an
// attempt that was running is one more entry, numbered in order, that
// says so and does not spend the item's one attempt.
func (c *customEnv) customOutcome(t *testing.T, handlerRuns map[string]int, killed bool) {
	t.Helper()
	code, out, errOut := c.sh("", "prodigy-action status cu --json")
	var st struct {
		Status string `json:"status"`
		Items  []struct {
			ItemID   string `json:"item_id"`
			State    string `json:"state"`
			Attempts int    `json:"attempts"`
		} `json:"items"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &st) != nil || st.Status != "completed" {
		t.Fatalf("status: exit %d\n%s%s", code, out, errOut)
	}
	want := map[string]string{"flaky": "merged", "handled": "skipped", "unhandled": "dlq"}
	attempts := map[string]int{}
	for _, it := range st.Items {
		attempts[it.ItemID] = it.Attempts
		if it.State != want[it.ItemID] || it.Attempts < 1 || !killed && it.Attempts != 1 || it.Attempts > 2 {
			t.Errorf("%s: state %s after %d attempt(s), want %s after 1 (2 when a kill cut one short)", it.ItemID, it.State, it.Attempts, want[it.ItemID])
		}
	}
	if files := gitOut(t, c.repo, "ls-tree", "-r", "--name-only", "prodigy/cu"); !strings.Contains(files, "out-flaky.txt") {
		t.Errorf("flaky's commit is not on the results branch:\n%s", files)
	}
	code, out, _ = c.sh("", "prodigy-action dlq list --job-id cu --json")
	if code != 0 || !strings.Contains(out, `"total":1`) || !strings.Contains(out, `"item_id":"unhandled"`) {
		t.Errorf("DLQ: exit %d %s", code, out)
	}
	if code, _, _ := c.sh("", "prodigy-action dlq inspect handled --job-id cu"); code != 2 {
		t.Errorf("a handled item has a DLQ record (inspect exit %d)", code)
	}
	d := c.record("cu", "unhandled")
	n := len(d.FailureHistory)
	if int(d.FailureCount) != n || n != attempts["unhandled"] || n == 0 {
		t.Fatalf("unhandled record: failure_count %d, %d entries, %d attempts", d.FailureCount, n, attempts["unhandled"])
	}
	for i, h := range d.FailureHistory {
		if int(h.AttemptNumber) != i+1 {
			t.Errorf("unhandled entry %d is attempt %d", i, h.AttemptNumber)
		}
		if i < n-1 && (h.ErrorType.Kind != dlq.Unknown || !strings.Contains(h.ErrorMessage, "was running when the process running the job died")) {
			t.Errorf("unhandled entry %d is not a lost attempt: %+v", i, h)
		}
	}
	if last := d.FailureHistory[n-1]; last.ErrorType != dlq.CommandFailedWith(4) || !strings.Contains(last.ErrorMessage, "broken for good") {
		t.Errorf("unhandled's last entry: %+v", last)
	}
	// What the handler saw: the item, the error's type, step and message,
	// the attempt, the item env var.
	lines := strings.Split(strings.TrimSpace(mustRead(t, c.handled)), "\n")
	got := map[string]int{}
	for _, l := range lines {
		f := strings.SplitN(l, "|", 6)
		if len(f) != 6 || f[1] != "CommandFailed" || f[2] != strconv.Itoa(attempts[f[0]]) || f[3] != f[0] ||
			f[4] != "broken for good [shell step 1 exited with code 4]" || !strings.HasPrefix(f[5], "shell: f=") {
			t.Errorf("handler saw %q", l)
		}
		got[f[0]]++
	}
	if fmt.Sprint(got) != fmt.Sprint(handlerRuns) {
		t.Errorf("handler runs per item = %v, want %v", got, handlerRuns)
	}
}

// TestOnItemFailureCustomAndStepRetry: on_item_failure {custom: [...]} and
// a step-level retry: end to end through the real binary.
func TestOnItemFailureCustomAndStepRetry(t *testing.T) {
	t.Parallel()
	c := newCustomEnv(t, "")
	code, out, errOut := c.sh("", "prodigy-action run "+c.wf+" --job-id cu --json")
	if code != 0 || !strings.Contains(out, `"successful": 1`) || !strings.Contains(out, `"skipped": 1`) || !strings.Contains(out, `"dlq_count": 1`) {
		t.Fatalf("run: exit %d\n%s%s", code, out, errOut)
	}
	// Each step ran 3 times: flaky passed on its 3rd, the others used the step's 3 tries.
	for _, item := range []string{"flaky", "handled", "unhandled"} {
		if n := c.count(item); n != 3 {
			t.Errorf("%s's step ran %d times, want 3 (step retry: attempts 3)", item, n)
		}
	}
	for _, want := range []string{"WARN custom failure handler for unhandled failed", "handled skipped after 1 attempt(s)", "unhandled failed after 1 attempt(s) → DLQ"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
	c.customOutcome(t, map[string]int{"handled": 1, "unhandled": 1}, false)
}

// TestOnItemFailureCustomAndStepRetryAfterKill9 kills the real binary
// (kill -9 from inside the step or the handler) between a step's retries
// and inside the custom handler, resumes, and checks the same outcome: a
// handler killed mid-run runs again on resume (at least once), the item's
// failed attempt is not run again and stays one failure_history entry.
func TestOnItemFailureCustomAndStepRetryAfterKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("kills processes")
	}
	t.Parallel()
	for _, tc := range []struct {
		kill     string
		handlers map[string]int
	}{
		{"step:flaky:2", map[string]int{"handled": 1, "unhandled": 1}},
		{"step:unhandled:2", map[string]int{"handled": 1, "unhandled": 1}},
		{"handler:handled", map[string]int{"handled": 2, "unhandled": 1}},
		{"handler:unhandled", map[string]int{"handled": 1, "unhandled": 2}},
	} {
		t.Run(tc.kill, func(t *testing.T) {
			c := newCustomEnv(t, tc.kill)
			code, out, errOut := c.sh("", "prodigy-action run "+c.wf+" --job-id cu --json")
			if code == 0 || !fileExists(filepath.Join(c.counters, "killed")) {
				t.Fatalf("run was not killed: exit %d\n%s%s", code, out, errOut)
			}
			code, out, errOut = c.sh("", "prodigy-action resume cu --json")
			if code != 0 {
				t.Fatalf("resume: exit %d\n%s%s", code, out, errOut)
			}
			if strings.Contains(errOut, "after 0 attempt(s)") {
				t.Errorf("resume reports 0 attempts for an item whose attempt ran before the kill:\n%s", errOut)
			}
			c.customOutcome(t, tc.handlers, true)
		})
	}
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// TestSeedExamplesAreAllCovered: the examples the other tests run are all
// the seeds have. A YAML or JSON example added to a seed that no test
// reads fails here (spec 136 and spec 138 have none: their code blocks
// are Rust sketches of Prodigy's internals and the commands run above).
func TestSeedExamplesAreAllCovered(t *testing.T) {
	for _, tc := range []struct {
		doc        string
		yaml, json int
	}{
		{"dlq-guide.md", 1, 3},               // TestSeedDLQGuideCommandsRunAsWritten, TestSeedStorageShapes
		{"backoff-strategies.md", 11, 0},     // TestSeedBackoffExamples
		{"session-and-dlq-storage.md", 0, 4}, // TestSeedStorageShapes
		{"spec-136-cleanup-failure-handling.md", 0, 0},
		{"spec-138-dlq-integration.md", 0, 0},
	} {
		text := readSeed(t, tc.doc)
		yaml := len(plainYAMLBlocks(text))
		for _, b := range fencedBlocks(text) {
			if b.Lang == "yaml" || b.Lang == "yml" {
				yaml++
			}
		}
		if yaml != tc.yaml {
			t.Errorf("%s: %d YAML examples, the suite covers %d", tc.doc, yaml, tc.yaml)
		}
		if n := len(seedJSONBlocks(text)); n != tc.json {
			t.Errorf("%s: %d JSON examples, the suite covers %d", tc.doc, n, tc.json)
		}
	}
}

// TestSeedGuidePolicies runs the guide's workflow with each
// on_item_failure policy the guide lists ("Available Policies") and checks
// the behaviour it describes: dlq sends failures to the DLQ and the job
// continues; retry retries with exponential backoff before the DLQ; skip
// marks them skipped with no record; stop halts the workflow at the first
// failure (max_parallel 1 here, so the items after it never start). custom
// has its own tests (TestOnItemFailureCustomAndStepRetry).
func TestSeedGuidePolicies(t *testing.T) {
	t.Parallel()
	guide := readSeed(t, "dlq-guide.md")
	for _, p := range []string{"dlq (default)", "retry:", "skip:", "stop:", "custom:"} {
		if !strings.Contains(guide, "  • "+p) {
			t.Fatalf("the guide's Available Policies no longer lists %q", p)
		}
	}
	_, withIDs := guideWorkflow(t)
	const anchor = "  on_item_failure: dlq\n"
	if !strings.Contains(withIDs, anchor) {
		t.Fatalf("the guide's workflow has no %q line", anchor)
	}
	type result struct {
		Status                               string
		Successful, Failed, Skipped, Pending int
		DLQCount                             int `json:"dlq_count"`
	}
	for _, tc := range []struct {
		policy string
		code   int
		want   result
		calls  map[string]int // claude calls per item
	}{
		{"dlq", 0, result{"completed", 1, 2, 0, 0, 2}, map[string]int{"item-123": 1, "item-456": 1, "item-789": 1}},
		{"retry", 0, result{"completed", 1, 2, 0, 0, 2}, map[string]int{"item-123": 3, "item-456": 3, "item-789": 1}},
		{"skip", 0, result{"completed", 1, 0, 2, 0, 0}, map[string]int{"item-123": 1, "item-456": 1, "item-789": 1}},
		{"stop", 1, result{"failed", 0, 1, 0, 2, 1}, map[string]int{"item-123": 1}},
	} {
		t.Run(tc.policy, func(t *testing.T) {
			t.Parallel()
			e := newSeedEnv(t, map[string]string{"items.json": guideItems})
			wf := strings.Replace(withIDs, anchor, "  on_item_failure: "+tc.policy+"\n", 1)
			if tc.policy == "stop" {
				wf = strings.Replace(wf, "  agent_template:\n", "  max_parallel: 1\n  agent_template:\n", 1)
			}
			path := filepath.Join(t.TempDir(), "wf.yml")
			if err := os.WriteFile(path, []byte(wf), 0o644); err != nil {
				t.Fatal(err)
			}
			code, out, errOut := e.sh("", "prodigy-action run "+path+" --job-id p --json")
			var got result
			if code != tc.code || json.Unmarshal([]byte(out), &got) != nil || got != tc.want {
				t.Fatalf("exit %d (want %d), result %+v, want %+v\n%s%s", code, tc.code, got, tc.want, out, errOut)
			}
			calls := mustRead(t, e.calls)
			for item, n := range tc.calls {
				if c := strings.Count(calls, item); c != n {
					t.Errorf("%s ran %d time(s), want %d", item, c, n)
				}
			}
			if len(tc.calls) == 1 && (strings.Contains(calls, "item-456") || strings.Contains(calls, "item-789")) {
				t.Errorf("stop: items after the first failure started:\n%s", calls)
			}
			if tc.policy == "retry" {
				if d := e.record("p", "item-123"); d.FailureCount != 3 || !strings.Contains(errOut, "retrying in 1s") || !strings.Contains(errOut, "retrying in 2s") {
					t.Errorf("retry: failure_count %d, stderr:\n%s", d.FailureCount, errOut)
				}
			}
			if tc.policy == "skip" {
				if code, _, errOut := e.sh("", "prodigy-action dlq list --job-id p"); code != 0 || !strings.Contains(errOut, "no records") {
					t.Errorf("skip left DLQ records: exit %d %s", code, errOut)
				}
			}
		})
	}
}
