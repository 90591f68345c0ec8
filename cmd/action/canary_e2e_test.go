package main

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// dlq retry --signature --sample through the CLI: an unknown signature
// runs nothing and exits 0 (a selection that matches nothing, issue 29)
// listing the known ones with eligible/total counts, --dry-run prints the plan, and a cluster
// that still fails stops after the sample with exit 1, the rest never run.
func TestCLICanaryRedrive(t *testing.T) {
	t.Parallel()
	repo := cliRepo(t, map[string]string{"items.json": `[{"n": "a", "k": "db"}, {"n": "b", "k": "db"}, {"n": "c", "k": "db"}, {"n": "z", "k": "net"}]`})
	home := t.TempDir()
	dir := t.TempDir()
	runs := filepath.Join(dir, "runs")
	wf := filepath.Join(dir, "wf.yml")
	if err := os.WriteFile(wf, []byte(`name: canary
map:
  input: items.json
  id_field: n
  agent_template:
    - shell: |
        echo ${item.n} >> `+runs+`
        if [ "${item.k}" = db ]; then echo "database unreachable"; else echo "network down"; fi
        exit 1
`), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := runCLI(t, home, "run", wf, "--repo", repo, "--job-id", "j1", "--json"); code != 0 || !strings.Contains(out, `"dlq_count": 4`) {
		t.Fatalf("run: exit %d\n%s\n%s", code, out, errOut)
	}
	ran := func() []string {
		b, _ := os.ReadFile(runs)
		_ = os.Remove(runs)
		out := strings.Fields(string(b))
		slices.Sort(out)
		return out
	}
	ran()

	code, _, errOut := runCLI(t, home, "dlq", "retry", "j1", "--signature", "NoSuch::sig", "--sample", "1")
	if code != 0 || !strings.Contains(errOut, `no records to retry: --signature "NoSuch::sig" matches no DLQ record of job j1`) {
		t.Fatalf("unknown signature: exit %d\n%s", code, errOut)
	}
	if got := ran(); len(got) != 0 {
		t.Fatalf("an unknown signature ran %v", got)
	}
	m := regexp.MustCompile(`"([^"]*database unreachable[^"]*)" 3/3`).FindStringSubmatch(errOut)
	if m == nil || !strings.Contains(errOut, "network down") {
		t.Fatalf("known signatures not listed with their counts:\n%s", errOut)
	}
	sig := m[1]

	code, out, errOut := runCLI(t, home, "dlq", "retry", "j1", "--signature", sig, "--sample", "2", "--dry-run")
	if code != 0 || out != "sample\ta\nsample\tb\nrest\tc\n" || !strings.Contains(errOut, "2 sample item(s) first, then 1 more") {
		t.Fatalf("dry run: exit %d\n%q\n%s", code, out, errOut)
	}
	if got := ran(); len(got) != 0 {
		t.Fatalf("dry run ran %v", got)
	}

	code, _, errOut = runCLI(t, home, "dlq", "retry", "j1", "--signature", sig, "--sample", "2", "--max-retries", "1")
	if code != 1 || !strings.Contains(errOut, sig) || !strings.Contains(errOut, "(a, b)") || !strings.Contains(errOut, "were not run") {
		t.Fatalf("still-failing cluster: exit %d\n%s", code, errOut)
	}
	if got := ran(); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("agents ran for %v, want only the sample [a b]", got)
	}

	code, _, errOut = runCLI(t, home, "dlq", "retry", "j1", "--sample", "2")
	if code != 2 || !strings.Contains(errOut, "--sample needs --signature") {
		t.Errorf("--sample alone: exit %d\n%s", code, errOut)
	}
}
