package archtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// departures are the edges of dag that ../shared/DESIGN.md's target graph
// does not have ("from → to": why). Apart from them dag is a subgraph of
// the target.
var departures = map[string]string{
	"shard → config": "a plan carries the workflow's text, which a shard and the gatherer parse " +
		"(config.Parse) to run it; the plan's shard count and job-wide limits are read from the " +
		"parsed workflow (map.agent_timeout, error_policy, the retry schedule), and PlanSpec takes the " +
		"*config.Workflow as runner.RunSpec does",
	"runner → claudecode": "how Claude Code is invoked and how its stream-json transcript is read is its own " +
		"concept (claudecode, issue #23); the engine's claude step runs the command claudecode builds and turns " +
		"the failure claudecode reads from the transcript into the step's",
	"claudecode → config": "a claude step's command line is built from the workflow's claude: block, the step's " +
		"claude_options and the caller's overrides (config.ClaudeSettings)",
	"claudecode → spend": "the final result event is read with the transcript reader spend's cost accounting uses " +
		"(spend.EachTranscriptLine), so both see the same lines",
	"claudecode → dlq": "a failed Claude run is described in the DLQ's error types (dlq.ErrorType, dlq.Classify), " +
		"which the engine records as they are",
	"runner → validate": "the static analysis of a workflow is its own concept (validate, issue #23), and the " +
		"engine applies the same rules when it runs: the interpolation check before a job starts, the items " +
		"pipeline's options, the map items' retry config and policy, the item-field typo check as items load",
	"validate → config": "it analyses a parsed workflow (config.Load, config.Workflow) and reports config's errors",
	"validate → items": "it compiles the items pipeline (json_path, filter, sort_by) without reading the input " +
		"and maps the map phase to items.Options",
	"validate → interp": "placeholders and their bash contexts are checked with interp's parser and scopes",
	"validate → retry": "it resolves the map phase's retry config into the retry.Policy whose schedule and " +
		"worst case it reports, the policy the engine then runs",
	"validate → claudecode": "it shows the Claude Code command line each claude step will run, built by " +
		"claudecode as the engine builds it",
	"cli → validate": "`validate` prints validate's Result, and run, demo and plan validate the workflow file " +
		"before they build a job from it",
	"actionapp → validate": "the Action validates the workflow input before it runs, plans or redrives",
	"shard → validate": "a plan's shard count and time bounds come from the map items' retry policy " +
		"(validate.ItemRetryConfig, validate.RetryPolicy), the one the engine uses",
	"report → validate": "report renders `validate`'s human output from validate's Result (a pure renderer, " +
		"as it renders the engine's results)",
}

// TestDAGDepartsFromDesignOnlyAsSaid reads DESIGN.md's graph (when the
// shared directory is next to the repository, as in this workplace) and
// checks that every edge of dag is either in it or listed in departures.
func TestDAGDepartsFromDesignOnlyAsSaid(t *testing.T) {
	root := moduleRootDir(t)
	data, err := os.ReadFile(filepath.Join(root, "..", "shared", "DESIGN.md"))
	if err != nil {
		t.Skipf("DESIGN.md is not next to the repository: %v", err)
	}
	design := designGraph(string(data))
	if len(design) == 0 {
		t.Fatal("no graph found in DESIGN.md")
	}
	for from, tos := range dag {
		for _, to := range tos {
			if slices.Contains(design[from], to) {
				continue
			}
			if _, ok := departures[from+" → "+to]; !ok {
				t.Errorf("%s → %s is allowed here but not in DESIGN.md's graph: move it, or list it in departures with why", from, to)
			}
		}
	}
}

// designGraph parses the "from ──► to to …" lines of DESIGN.md's package
// graph; the leaves line ("a, b, c: no project imports") gives empty nodes.
func designGraph(doc string) map[string][]string {
	g := map[string][]string{}
	for _, line := range strings.Split(doc, "\n") {
		from, rest, ok := strings.Cut(line, "──►")
		if !ok {
			continue
		}
		if i := strings.Index(rest, "("); i >= 0 {
			rest = rest[:i]
		}
		node := strings.TrimSuffix(strings.TrimSpace(from), "/*")
		g[node] = strings.Fields(rest)
	}
	return g
}

// moduleRootDir is the directory of the module's go.mod.
func moduleRootDir(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	return filepath.Dir(strings.TrimSpace(string(out)))
}
