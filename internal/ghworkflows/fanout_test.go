package ghworkflows

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"
)

// root is the repository root (this package is internal/ghworkflows).
const root = "../.."

// levels orders GITHUB_TOKEN permission levels.
var levels = map[string]int{"none": 0, "read": 1, "write": 2}

// scopes are the GITHUB_TOKEN permission scopes (GitHub's docs).
var scopes = []string{"actions", "attestations", "checks", "contents", "deployments", "discussions", "id-token",
	"issues", "models", "packages", "pages", "pull-requests", "repository-projects", "security-events", "statuses"}

// grant is a set of permissions: scope → level.
type grant map[string]int

// permissions reads a `permissions:` value: a map, read-all, write-all or
// {} (absent means "inherit", reported as nil).
func permissions(t *testing.T, where string, v any) grant {
	t.Helper()
	g := grant{}
	switch p := v.(type) {
	case nil:
		return nil
	case string:
		l := map[string]int{"read-all": 1, "write-all": 2}[p]
		if l == 0 {
			t.Fatalf("%s: permissions %q", where, p)
		}
		for _, s := range scopes {
			g[s] = l
		}
	case map[string]any:
		for s, l := range p {
			lv, ok := levels[fmt.Sprint(l)]
			if !ok {
				t.Fatalf("%s: permission %s: %v", where, s, l)
			}
			g[s] = lv
		}
	default:
		t.Fatalf("%s: permissions %T", where, v)
	}
	return g
}

// callerGrants reads the ```yaml permissions block of docs/shards.md:
// the minimal grant (entries whose comment begins with "only" left out)
// and the full one.
func callerGrants(t *testing.T) (minimal, full grant) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "docs", "shards.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(data), "```yaml\npermissions:\n")
	if !ok {
		t.Fatal("docs/shards.md has no ```yaml permissions: block for the caller")
	}
	block, _, _ = strings.Cut(block, "```")
	minimal, full = grant{}, grant{}
	line := regexp.MustCompile(`^\s+([a-z-]+):\s*([a-z]+)\s*(?:#\s*(.*))?$`)
	sc := bufio.NewScanner(strings.NewReader(block))
	for sc.Scan() {
		m := line.FindStringSubmatch(sc.Text())
		if m == nil {
			t.Fatalf("docs/shards.md permissions line %q", sc.Text())
		}
		full[m[1]] = levels[m[2]]
		if !strings.HasPrefix(strings.ToLower(m[3]), "only") {
			minimal[m[1]] = levels[m[2]]
		}
	}
	if len(minimal) == 0 {
		t.Fatal("docs/shards.md grants nothing")
	}
	return minimal, full
}

func loadYAML(t *testing.T, rel string) map[string]any {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatalf("%s: %v", rel, err)
	}
	return doc
}

// exceeds lists what want asks beyond have.
func exceeds(want, have grant) []string {
	var out []string
	for s, l := range want {
		if l > have[s] {
			out = append(out, fmt.Sprintf("%s: %s (caller grants %s)", s, name(l), name(have[s])))
		}
	}
	return out
}

func name(l int) string {
	for n, v := range levels {
		if v == l {
			return n
		}
	}
	return "?"
}

// calledJobsFit applies GitHub's rule for reusable workflows: the called
// workflow's top-level and job permissions may only keep or reduce what
// the caller grants; one job asking for more makes GitHub refuse the whole
// run before anything starts, whatever the job's `if:`.
func calledJobsFit(t *testing.T, wf map[string]any, caller grant, callerName string) {
	t.Helper()
	if extra := exceeds(permissions(t, "top level", wf["permissions"]), caller); len(extra) > 0 {
		t.Errorf("fanout.yml top-level permissions exceed %s: %v", callerName, extra)
	}
	jobs, _ := wf["jobs"].(map[string]any)
	if len(jobs) == 0 {
		t.Fatal("fanout.yml has no jobs")
	}
	for id, j := range jobs {
		job, _ := j.(map[string]any)
		if extra := exceeds(permissions(t, "job "+id, job["permissions"]), caller); len(extra) > 0 {
			t.Errorf("job %s asks for more than %s: GitHub would refuse the run: %v", id, callerName, extra)
		}
	}
}

func TestFanoutPermissionsFitTheCallersGrant(t *testing.T) {
	wf := loadYAML(t, ".github/workflows/fanout.yml")
	minimal, full := callerGrants(t)
	calledJobsFit(t, wf, minimal, "docs/shards.md's minimal grant")
	calledJobsFit(t, wf, full, "docs/shards.md's full grant")
	// The e2e caller, which calls it the way the docs say.
	caller := loadYAML(t, ".ci/e2e/fanout-caller.yml")
	calledJobsFit(t, wf, permissions(t, "fanout-caller.yml", caller["permissions"]), ".ci/e2e/fanout-caller.yml")
	// What each job must be able to do with what it gets.
	jobs := wf["jobs"].(map[string]any)
	shard := permissions(t, "shard", jobs["shard"].(map[string]any)["permissions"])
	if shard == nil || shard["contents"] != levels["read"] || len(shard) != 1 {
		t.Errorf("shard jobs should reduce to contents: read (they never push): %v", shard)
	}
	if minimal["pull-requests"] < levels["write"] || minimal["contents"] < levels["read"] {
		t.Errorf("docs/shards.md's grant lacks what gather needs (pull-requests: write, contents: read): %v", minimal)
	}
	if full["actions"] < levels["read"] {
		t.Errorf("docs/shards.md does not tell from-dlq-run callers to grant actions: read: %v", full)
	}
	for _, id := range []string{"plan", "gather"} {
		if p := jobs[id].(map[string]any)["permissions"]; p != nil {
			t.Errorf("job %s sets permissions %v: it must inherit the caller's (actions: read for from-dlq-run, contents: write for push)", id, p)
		}
	}
}

// Artifact names are derived from the plan's job id (unique per plan), so
// two fan-outs in one run and a re-run of all jobs never share a name, and
// gather downloads only its own plan's shard outputs.
func TestFanoutArtifactNamesArePerPlan(t *testing.T) {
	wf := loadYAML(t, ".github/workflows/fanout.yml")
	jobs := wf["jobs"].(map[string]any)
	var names, patterns []string
	for id, j := range jobs {
		steps, _ := j.(map[string]any)["steps"].([]any)
		for _, s := range steps {
			st, _ := s.(map[string]any)
			uses, _ := st["uses"].(string)
			with, _ := st["with"].(map[string]any)
			switch {
			case strings.HasPrefix(uses, "actions/upload-artifact@"):
				n := fmt.Sprint(with["name"])
				names = append(names, n)
				if !strings.Contains(n, "steps.plan.outputs.job-id") && !strings.Contains(n, "needs.plan.outputs.job-id") {
					t.Errorf("job %s uploads %q: not named after the plan's job id", id, n)
				}
				if !strings.Contains(fmt.Sprint(with["retention-days"]), "inputs.intermediate-retention-days") {
					t.Errorf("job %s: retention-days %v is not the intermediate-retention-days input", id, with["retention-days"])
				}
			case strings.HasPrefix(uses, "actions/download-artifact@"):
				if p, ok := with["pattern"]; ok {
					patterns = append(patterns, fmt.Sprint(p))
					if !strings.Contains(fmt.Sprint(p), "needs.plan.outputs.job-id") {
						t.Errorf("job %s downloads pattern %v: not limited to its plan's job id", id, p)
					}
				}
			}
		}
	}
	if len(names) != 2 || len(patterns) != 1 {
		t.Errorf("uploads %v, download patterns %v; want the plan and shard uploads and one pattern", names, patterns)
	}
	shard := jobs["shard"].(map[string]any)
	if mp := fmt.Sprint(shard["strategy"].(map[string]any)["max-parallel"]); !strings.Contains(mp, "inputs.shard-max-parallel") {
		t.Errorf("shard matrix max-parallel = %s", mp)
	}
	for id, j := range jobs {
		if tm := fmt.Sprint(j.(map[string]any)["timeout-minutes"]); !strings.Contains(tm, "inputs.timeout-minutes") {
			t.Errorf("job %s timeout-minutes = %s", id, tm)
		}
	}
	outs := wf["on"].(map[string]any)["workflow_call"].(map[string]any)["outputs"].(map[string]any)
	if _, ok := outs["cost-usd"]; !ok {
		t.Error("fanout.yml has no cost-usd output")
	}
}
