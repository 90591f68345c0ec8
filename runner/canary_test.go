package runner_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/prodigy-action/prodigy-action/runner"
)

// canaryRepo runs a job whose items of kind "db" fail with one signature
// until the file fixed exists, and whose "net" item always fails with
// another. Every agent run appends its item name to runs.
type canaryRepo struct {
	*testRepo
	runs, fixed, reduces string
	dbSig                string
}

func newCanaryRepo(t *testing.T) *canaryRepo {
	t.Helper()
	r := newTestRepo(t, map[string]string{"items.json": `[{"name": "d", "kind": "db"}, {"name": "b", "kind": "db"},
		{"name": "e", "kind": "net"}, {"name": "a", "kind": "db"}, {"name": "c", "kind": "db"}]`})
	dir := t.TempDir()
	c := &canaryRepo{testRepo: r, runs: filepath.Join(dir, "runs"), fixed: filepath.Join(dir, "fixed"), reduces: filepath.Join(dir, "reduces")}
	wf := r.Workflow(`
name: canary
map:
  input: items.json
  id_field: name
  agent_template:
    - shell: |
        echo ${item.name} >> ` + c.runs + `
        if [ "${item.kind}" = db ] && [ ! -f ` + c.fixed + ` ]; then echo "database unreachable"; exit 1; fi
        if [ "${item.kind}" = net ]; then echo "network down"; exit 1; fi
        echo ${item.name} > out-${item.name}.txt && git add . && git commit -qm ${item.name}
reduce:
  - shell: echo reduce >> ` + c.reduces + `
`)
	o, _, stderr, _ := r.options(wf)
	res, err := r.run(o)
	if err != nil || res.Failed != 5 {
		t.Fatalf("run: %v %s\n%s", err, mustJSON(t, res), stderr)
	}
	recs := r.DLQRecords("job-1")
	c.dbSig = recs["a"].ErrorSignature
	for _, id := range []string{"b", "c", "d"} {
		if recs[id].ErrorSignature != c.dbSig {
			t.Fatalf("item %s signature %q, want the db cluster's %q", id, recs[id].ErrorSignature, c.dbSig)
		}
	}
	if recs["e"].ErrorSignature == c.dbSig || c.dbSig == "" {
		t.Fatalf("net item shares the db signature %q", c.dbSig)
	}
	c.truncateRuns()
	return c
}

func (c *canaryRepo) truncateRuns() {
	if err := os.WriteFile(c.runs, nil, 0o644); err != nil {
		c.T.Fatal(err)
	}
}

// ran lists the items whose agent ran since the last truncateRuns, sorted.
func (c *canaryRepo) ran() []string {
	b, err := os.ReadFile(c.runs)
	if err != nil {
		c.T.Fatal(err)
	}
	out := strings.Fields(string(b))
	slices.Sort(out)
	return out
}

func (c *canaryRepo) retry(sig string, sample int, dryRun bool) (*runner.Result, string, error) {
	o, _, stderr, _ := c.options(nil)
	res, err := retryDLQ(context.Background(), RetryOptions{
		Home: c.Home, JobID: "job-1", MaxRetries: 1, Signature: sig, Sample: sample, DryRun: dryRun, Run: o})
	return res, stderr.String(), err
}

func TestCanaryStopsWhenSampleFailsTheSameWay(t *testing.T) {
	t.Parallel()
	c := newCanaryRepo(t)
	before := c.Git("rev-parse", "prodigy/job-1")
	res, stderr, err := c.retry(c.dbSig, 2, false)
	if !errors.Is(err, runner.ErrJobFailed) || runner.ExitCode(err) != 1 {
		t.Fatalf("canary on a still-failing cluster: %v (exit %d)\n%s", err, runner.ExitCode(err), stderr)
	}
	for _, want := range []string{c.dbSig, "a, b", "2 sampled", "other 2 item(s)"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if got := c.ran(); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("agents ran for %v, want only the sample [a b]", got)
	}
	if res == nil || res.Canary == nil || !res.Canary.Stopped || !slices.Equal(res.Canary.Rest, []string{"c", "d"}) {
		t.Errorf("result's canary plan: %s", mustJSON(t, res))
	}
	if n := len(c.DLQRecords("job-1")); n != 5 {
		t.Errorf("DLQ has %d records, want all 5", n)
	}
	if after := c.Git("rev-parse", "prodigy/job-1"); after != before {
		t.Logf("results branch moved %s -> %s (reduce of the sample run)", before, after)
	}
}

func TestCanaryRedrivesRestWhenSampleIsFixed(t *testing.T) {
	t.Parallel()
	c := newCanaryRepo(t)
	if err := os.WriteFile(c.fixed, []byte("ok\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	res, stderr, err := c.retry(c.dbSig, 1, false)
	if err != nil || res.Canary == nil || res.Canary.Stopped {
		t.Fatalf("canary on a fixed cluster: %v %s\n%s", err, mustJSON(t, res), stderr)
	}
	if got := c.ran(); !slices.Equal(got, []string{"a", "b", "c", "d"}) {
		t.Errorf("agents ran for %v, want the db cluster [a b c d] and not the net item", got)
	}
	recs := c.DLQRecords("job-1")
	if _, ok := recs["e"]; len(recs) != 1 || !ok {
		t.Errorf("DLQ %v, want only e (other cluster)", recs)
	}
	if res.Successful != 4 || res.DLQCount != 1 {
		t.Errorf("result: %s", mustJSON(t, res))
	}
	// The initial run reduced once; the canary's sample leaves reduce to
	// the rest, so the redrive reduces exactly once more.
	if b, _ := os.ReadFile(c.reduces); strings.Count(string(b), "reduce") != 2 {
		t.Errorf("reduce ran %d time(s) in all, want 2 (the run, then once for the redrive)", strings.Count(string(b), "reduce"))
	}
	files := strings.Join(c.Files("prodigy/job-1"), " ")
	for _, want := range []string{"out-a.txt", "out-b.txt", "out-c.txt", "out-d.txt"} {
		if !strings.Contains(files, want) {
			t.Errorf("results branch lacks %s: %s", want, files)
		}
	}
}

func TestCanarySignatureAloneRedrivesOnlyThatCluster(t *testing.T) {
	t.Parallel()
	c := newCanaryRepo(t)
	res, stderr, err := c.retry(c.dbSig, 0, false)
	if err != nil || res.DLQCount != 5 {
		t.Fatalf("--signature alone: %v %s\n%s", err, mustJSON(t, res), stderr)
	}
	if got := c.ran(); !slices.Equal(got, []string{"a", "b", "c", "d"}) {
		t.Errorf("agents ran for %v, want the whole db cluster only", got)
	}
}

func TestCanaryDryRunShowsPlanAndChangesNothing(t *testing.T) {
	t.Parallel()
	c := newCanaryRepo(t)
	before := c.Git("rev-parse", "prodigy/job-1")
	res, stderr, err := c.retry(c.dbSig, 2, true)
	if err != nil || res.Canary == nil {
		t.Fatalf("dry run: %v %s\n%s", err, mustJSON(t, res), stderr)
	}
	if !slices.Equal(res.Canary.Sample, []string{"a", "b"}) || !slices.Equal(res.Canary.Rest, []string{"c", "d"}) || res.Canary.Signature != c.dbSig {
		t.Errorf("plan: %s", mustJSON(t, res.Canary))
	}
	var ids []string
	for _, it := range res.Items {
		ids = append(ids, it.ItemID)
	}
	slices.Sort(ids)
	if !slices.Equal(ids, []string{"a", "b", "c", "d"}) {
		t.Errorf("dry run items %v, want the db cluster", ids)
	}
	if got := c.ran(); len(got) != 0 {
		t.Errorf("dry run ran agents for %v", got)
	}
	if after := c.Git("rev-parse", "prodigy/job-1"); after != before {
		t.Errorf("results branch moved %s -> %s", before, after)
	}
	if n := len(c.DLQRecords("job-1")); n != 5 {
		t.Errorf("DLQ has %d records, want 5", n)
	}
}

// An unknown signature selects nothing: exit 0 like a --filter that
// matches nothing (issue 29), stderr listing every signature with its
// eligible/total counts.
func TestCanaryUnknownSignatureListsKnownOnes(t *testing.T) {
	t.Parallel()
	c := newCanaryRepo(t)
	_, stderr, err := c.retry("NoSuch::thing", 1, false)
	if err != nil {
		t.Fatalf("unknown signature: %v (exit %d), want nothing run, exit 0", err, runner.ExitCode(err))
	}
	recs := c.DLQRecords("job-1")
	for _, want := range []string{"no records to retry", `"NoSuch::thing" matches no DLQ record`, "eligible/total", fmt.Sprintf("%q 4/4", c.dbSig), recs["e"].ErrorSignature} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr %q lacks %q", stderr, want)
		}
	}
	if got := c.ran(); len(got) != 0 {
		t.Errorf("ran agents for %v", got)
	}
	_, err = retryDLQ(context.Background(), RetryOptions{Home: c.Home, JobID: "job-1", Sample: 1})
	if runner.ExitCode(err) != 2 {
		t.Errorf("--sample without --signature: %v, want a usage error", err)
	}
}

// standInFailingClaude writes a stand-in `claude` for the canary: it
// appends the prompt's last word (the item) to dir/runs and, until
// dir/fixed exists, emits a stream-json transcript whose result is an
// error_during_execution with a fixed cause (the "schema" cluster) or,
// for prompts naming kind "lint", another cause; once fixed it commits
// a file and succeeds.
func standInFailingClaude(t *testing.T) (path, dir string) {
	t.Helper()
	dir = t.TempDir()
	script := `#!/usr/bin/env bash
dir="` + dir + `"
prompt="${@: -1}"
name="${prompt##* }"
echo "$name" >> "$dir/runs"
echo '{"type":"system","subtype":"init","session_id":"s","model":"claude-x"}'
echo '{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"working"}]},"session_id":"s"}'
case "$prompt" in
  *" lint "*)
    echo '{"type":"result","subtype":"error_max_turns","is_error":true,"result":"","num_turns":30,"total_cost_usd":0.02}'
    exit 1 ;;
esac
if [[ ! -e "$dir/fixed" ]]; then
  echo '{"type":"result","subtype":"error_during_execution","is_error":true,"result":"Migration failed: schema lock is held by another session","num_turns":4,"total_cost_usd":0.05}'
  exit 1
fi
echo "$name" > "claude-$name.txt" && git add "claude-$name.txt" && git commit -qm "claude: $name"
echo '{"type":"result","subtype":"success","is_error":false,"result":"migrated","num_turns":3,"total_cost_usd":0.1}'
`
	path = filepath.Join(dir, "claude")
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path, dir
}

// TestCanaryStopsOnAClaudeCluster: four items whose claude step fails
// with one cause form one cluster (one error_signature from the
// transcript's result, whatever the item); a canary of two stops there,
// the other two never start Claude, and after the fix the same command
// redrives the whole cluster.
func TestCanaryStopsOnAClaudeCluster(t *testing.T) {
	t.Parallel()
	r := newTestRepo(t, map[string]string{"items.json": `[{"name": "d", "kind": "schema"}, {"name": "b", "kind": "schema"},
		{"name": "e", "kind": "lint"}, {"name": "a", "kind": "schema"}, {"name": "c", "kind": "schema"}]`})
	claude, dir := standInFailingClaude(t)
	wf := r.Workflow(`
name: claude-canary
map:
  input: items.json
  id_field: name
  agent_template:
    - claude: "/migrate ${item.kind} ${item.name}"
`)
	o, _, stderr, _ := r.options(wf)
	o.ClaudeCommand = claude
	res, err := r.run(o)
	if err != nil || res.Failed != 5 {
		t.Fatalf("run: %v %s\n%s", err, mustJSON(t, res), stderr)
	}
	recs := r.DLQRecords("job-1")
	sig := recs["a"].ErrorSignature
	if !strings.Contains(sig, "Migration failed: schema lock is held by another session") {
		t.Fatalf("signature %q does not come from the claude result", sig)
	}
	for _, id := range []string{"b", "c", "d"} {
		if recs[id].ErrorSignature != sig {
			t.Fatalf("item %s signature %q, want the cluster's %q", id, recs[id].ErrorSignature, sig)
		}
	}
	if recs["e"].ErrorSignature == sig {
		t.Fatalf("the lint item shares the signature %q", sig)
	}
	if f, ok := recs["a"].LastFailure(); !ok || f.JSONLogLocation == nil || !strings.HasSuffix(*f.JSONLogLocation, ".jsonl") {
		t.Errorf("the claude failure has no transcript: %+v", f)
	}
	if err := os.Remove(filepath.Join(dir, "runs")); err != nil {
		t.Fatal(err)
	}

	retry := func() (*runner.Result, string, error) {
		o, _, stderr, _ := r.options(nil)
		o.ClaudeCommand = claude
		res, err := retryDLQ(context.Background(), RetryOptions{
			Home: r.Home, JobID: "job-1", MaxRetries: 1, Signature: sig, Sample: 2, Run: o})
		return res, stderr.String(), err
	}
	res, stderr2, err := retry()
	if !errors.Is(err, runner.ErrJobFailed) || runner.ExitCode(err) != 1 || !strings.Contains(err.Error(), sig) {
		t.Fatalf("canary on the still-failing claude cluster: %v (exit %d)\n%s", err, runner.ExitCode(err), stderr2)
	}
	if runs := readLines(t, filepath.Join(dir, "runs")); !slices.Equal(slices.Sorted(slices.Values(runs)), []string{"a", "b"}) {
		t.Errorf("claude ran for %v, want only the sample [a b]", runs)
	}
	if res == nil || res.Canary == nil || !res.Canary.Stopped || !slices.Equal(res.Canary.Rest, []string{"c", "d"}) {
		t.Errorf("canary plan: %s", mustJSON(t, res))
	}
	recs = r.DLQRecords("job-1")
	if len(recs) != 5 || recs["a"].ErrorSignature != sig || recs["a"].FailureCount != 2 {
		t.Errorf("DLQ after the canary: %d records, a = %+v", len(recs), recs["a"])
	}

	// The fix lands: the same canary now passes and redrives the rest.
	if err := os.WriteFile(filepath.Join(dir, "fixed"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "runs")); err != nil {
		t.Fatal(err)
	}
	res, stderr2, err = retry()
	if err != nil || res.Successful != 4 || res.Canary == nil || res.Canary.Stopped {
		t.Fatalf("canary after the fix: %v %s\n%s", err, mustJSON(t, res), stderr2)
	}
	runs := readLines(t, filepath.Join(dir, "runs"))
	slices.Sort(runs)
	if !slices.Equal(runs, []string{"a", "b", "c", "d"}) {
		t.Errorf("claude ran for %v, want the cluster [a b c d] and not the lint item", runs)
	}
	if recs := r.DLQRecords("job-1"); len(recs) != 1 || recs["e"].ItemID != "e" {
		t.Errorf("DLQ after the fix: %v, want only e", recs)
	}
}
