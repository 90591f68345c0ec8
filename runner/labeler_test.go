package runner_test

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"

	"github.com/prodigy-action/prodigy-action/jobstore"
	"github.com/prodigy-action/prodigy-action/runner"
)

// TestLabelerReadsOnlyTheJobsFields: the dlq commands label items through
// Labeler, which needs the job's workflow path, not its items; a job of a
// million items cost `dlq list` 2 s and 620 MiB when it loaded them all.
// With the items of checkpoint.json unreadable, Labeler still finds the
// workflow's id_field (items labelled by id, not by their data).
func TestLabelerReadsOnlyTheJobsFields(t *testing.T) {
	r := newTestRepo(t, map[string]string{"items.json": `[{"key":"a","title":"first"},{"key":"b","title":"second"}]`})
	wf := r.Workflow(`name: labels
mode: mapreduce
map:
  input: items.json
  id_field: key
  agent_template:
    - shell: "true"
`)
	o, _, _, _ := r.options(wf)
	if _, err := r.run(o); err != nil {
		t.Fatal(err)
	}
	p, err := jobstore.FindJob(r.Home, "", "job-1")
	if err != nil {
		t.Fatal(err)
	}
	data := json.RawMessage(`{"key":"a","title":"first"}`)
	if got := runner.Labeler(p)("a", data); got != "a" {
		t.Fatalf("Labeler of a readable job = %q, want the id", got)
	}
	b, err := os.ReadFile(p.Checkpoint())
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(b, []byte(`"items":`))
	if i < 0 {
		t.Fatalf("no items in %s", b)
	}
	if err := os.WriteFile(p.Checkpoint(), append(b[:i+len(`"items":`)], `[{"item_id": not json`...), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := jobstore.LoadCheckpoint(p); err == nil {
		t.Fatal("the damaged checkpoint still loads whole; the test proves nothing")
	}
	if got := runner.Labeler(p)("a", data); got != "a" {
		t.Errorf("Labeler with the items unreadable = %q, want the id (it read the items)", got)
	}
}
