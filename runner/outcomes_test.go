package runner_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/prodigy-action/prodigy-action/cli/cmdutil"
	"github.com/prodigy-action/prodigy-action/jobstore"
	"github.com/prodigy-action/prodigy-action/runner"
)

// TestLargeJobOutcomesAreReadFromTheCheckpoint: a job of more than
// KeptOutcomes items ends without a copy of every outcome in memory, and
// everything that reads them — EachItem, reduce's ${map.results}, the
// --json output — sees exactly what the checkpoint holds, as a job whose
// outcomes are kept does.
func TestLargeJobOutcomesAreReadFromTheCheckpoint(t *testing.T) {
	defer runner.SetKeptOutcomes(3)()
	r := newTestRepo(t, map[string]string{"items.json": itemsJSON(9)})
	out := filepath.Join(t.TempDir(), "results.json")
	wf := r.Workflow(fmt.Sprintf(`
name: outcomes
mode: mapreduce
map:
  input: items.json
  max_parallel: 3
  agent_template:
    - shell: test ${item.n} != 4 && echo "${item.n}" > "out-${item.n}.txt" && git add . && git commit -q -m "item ${item.n}"
reduce:
  - shell: printf '%%s' ${map.results} > %s
`, out))
	o, _, stderr, _ := r.options(wf)
	res, err := r.run(o)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, stderr)
	}
	if res.Items != nil || !res.HasItems() || res.Total != 9 || res.Successful != 8 || res.Failed != 1 {
		t.Fatalf("result: items kept %v, has items %v, counts %d/%d/%d", res.Items != nil, res.HasItems(), res.Total, res.Successful, res.Failed)
	}
	var got []runner.ItemOutcome
	if err := res.EachItem(func(it runner.ItemOutcome) error { got = append(got, it); return nil }); err != nil {
		t.Fatal(err)
	}
	cp, err := jobstore.LoadCheckpoint(jobstore.Paths{Home: r.Home, Repo: res.Repo, JobID: res.JobID})
	if err != nil {
		t.Fatal(err)
	}
	var want []runner.ItemOutcome
	for _, it := range cp.Items {
		want = append(want, it.ItemOutcome)
	}
	if mustJSON(t, got) != mustJSON(t, want) {
		t.Fatalf("EachItem:\n%s\nthe checkpoint:\n%s", mustJSON(t, got), mustJSON(t, want))
	}
	reduced, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if string(reduced) != mustJSON(t, want) {
		t.Fatalf("${map.results}:\n%s\nwant:\n%s", reduced, mustJSON(t, want))
	}
	var streamed, whole bytes.Buffer
	if err := cmdutil.WriteResultJSON(&streamed, res); err != nil {
		t.Fatal(err)
	}
	kept := *res
	kept.Items = got
	if err := cmdutil.WriteJSON(&whole, &kept); err != nil {
		t.Fatal(err)
	}
	if streamed.String() != whole.String() {
		t.Fatalf("--json of a result read from the checkpoint:\n%s\nwith its items kept:\n%s", streamed.String(), whole.String())
	}
	var doc struct {
		Items []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(streamed.Bytes(), &doc); err != nil || len(doc.Items) != 9 {
		t.Fatalf("--json lists %d items (%v)", len(doc.Items), err)
	}
}
