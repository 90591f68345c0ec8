package runner_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/prodigy-action/prodigy-action/runner/event"
)

// eventTypes maps every event_type to its struct, the documented schema.
var eventTypes = map[string]func() event.Event{}

func init() {
	for _, ev := range []event.Event{
		event.JobStarted{}, event.JobResumed{}, event.JobCompleted{}, event.JobPaused{}, event.JobFailed{},
		event.PhaseStarted{}, event.PhaseCompleted{}, event.AgentStarted{}, event.AgentRetrying{},
		event.AgentCompleted{}, event.AgentFailed{}, event.ItemSkippedEvent{}, event.DLQItemAdded{},
		event.DLQItemRemoved{}, event.DLQItemsEvicted{}, event.WorktreeCreated{}, event.WorktreeMerged{},
		event.WorktreeCleaned{}, event.WorktreeCleanupFailed{},
	} {
		typ := reflect.TypeOf(ev)
		eventTypes[ev.EventType()] = func() event.Event { return reflect.New(typ).Interface().(event.Event) }
	}
}

func keys(m map[string]json.RawMessage) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// TestEventLogMatchesTheEventStructs runs a real job (a success, a retried
// failure, a skipped item, a resume) and decodes every line of events.jsonl
// strictly into the struct of its event_type: no field outside the
// documented schema, none missing, and the envelope carries the job id.
func TestEventLogMatchesTheEventStructs(t *testing.T) {
	t.Parallel()
	if len(eventTypes) != 19 {
		t.Fatalf("event types are not unique: %d", len(eventTypes))
	}
	r := newTestRepo(t, map[string]string{"items.json": `[{"id": "ok"}, {"id": "bad"}]`})
	wf := r.Workflow(`
name: events
mode: mapreduce
setup:
  - shell: echo setting up
map:
  input: items.json
  max_parallel: 2
  agent_template:
    - shell: |
        if [ "${item.id}" = bad ]; then echo "boom" >&2; exit 7; fi
        echo ok > ok.txt && git add ok.txt && git commit -qm ok
  error_policy:
    on_item_failure: dlq
    retry_config:
      attempts: 2
      backoff: fixed
      initial_delay: 1s
reduce:
  - shell: echo reduced
`)
	o, _, stderr, _ := r.options(wf)
	if _, err := r.run(o); err != nil {
		t.Fatalf("run: %v\n%s", err, stderr)
	}
	data, err := os.ReadFile(filepath.Join(r.Home, "events", "repo", "job-1", "events.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, line := range bytes.Split(bytes.TrimSpace(data), []byte("\n")) {
		var rec event.EventRecord
		if err := json.Unmarshal(line, &rec); err != nil {
			t.Fatalf("line %s: %v", line, err)
		}
		if rec.ID == "" || rec.Timestamp.IsZero() || rec.CorrelationID != "job-1" {
			t.Errorf("envelope = %s", line)
		}
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(rec.Event, &fields); err != nil {
			t.Fatal(err)
		}
		var typ, job string
		_ = json.Unmarshal(fields["event_type"], &typ)
		_ = json.Unmarshal(fields["job_id"], &job)
		delete(fields, "event_type")
		delete(fields, "job_id")
		mk, ok := eventTypes[typ]
		if !ok || job != "job-1" {
			t.Errorf("unknown event %q (job %q): %s", typ, job, line)
			continue
		}
		seen[typ]++
		rest, _ := json.Marshal(fields)
		ev := mk()
		dec := json.NewDecoder(bytes.NewReader(rest))
		dec.DisallowUnknownFields()
		if err := dec.Decode(ev); err != nil {
			t.Errorf("%s does not fit %T: %v", line, ev, err)
			continue
		}
		again, _ := json.Marshal(ev)
		var back map[string]json.RawMessage
		_ = json.Unmarshal(again, &back)
		if !reflect.DeepEqual(keys(back), keys(fields)) {
			t.Errorf("%s: fields %s, struct renders %s", typ, rest, again)
		}
	}
	for typ, want := range map[string]int{"job_started": 1, "phase_started": 3, "phase_completed": 3, "agent_started": 2,
		"agent_retrying": 1, "agent_completed": 1, "agent_failed": 1, "dlq_item_added": 1, "worktree_merged": 1, "job_completed": 1} {
		if seen[typ] != want {
			t.Errorf("%d %s events, want %d (all: %v)", seen[typ], typ, want, seen)
		}
	}
}
