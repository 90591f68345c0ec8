package event_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prodigy-action/prodigy-action/jobstore"
	"github.com/prodigy-action/prodigy-action/runner/event"
)

// TestLogWritesOneRecordPerEvent: each Emit appends one line, an
// EventRecord whose event carries event_type, job_id and the event's
// fields, after the Redact hook ran over it.
func TestLogWritesOneRecordPerEvent(t *testing.T) {
	p := jobstore.Paths{Home: t.TempDir(), Repo: "repo", JobID: "job-1"}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	var warned []string
	l := event.Open(p, func() time.Time { return at }, func(m string) { warned = append(warned, m) })
	l.Redact = func(b []byte) []byte { return bytes.ReplaceAll(b, []byte("hunter2"), []byte("***")) }
	l.Emit(event.AgentStarted{AgentID: "agent-1", ItemID: "item hunter2", Attempt: 1, Branch: "b"})
	l.Emit(event.PhaseCompleted{Phase: "map"})
	l.Close()

	f, err := os.Open(p.Events())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var recs []event.EventRecord
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if strings.Contains(sc.Text(), "hunter2") {
			t.Errorf("unredacted line: %s", sc.Text())
		}
		var r event.EventRecord
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		recs = append(recs, r)
	}
	if len(recs) != 2 || len(warned) != 0 {
		t.Fatalf("%d records, warnings %q", len(recs), warned)
	}
	var ev map[string]any
	if err := json.Unmarshal(recs[0].Event, &ev); err != nil {
		t.Fatal(err)
	}
	if ev["event_type"] != "agent_started" || ev["job_id"] != "job-1" || ev["item_id"] != "item ***" || recs[0].CorrelationID != "job-1" || !recs[0].Timestamp.Equal(at) || recs[0].ID == recs[1].ID {
		t.Errorf("record %+v, event %v", recs[0], ev)
	}
}

// TestLogThatCannotOpenWarnsOnceAndDrops: an event file that cannot be
// made is one warning; the job goes on and later events are dropped.
func TestLogThatCannotOpenWarnsOnceAndDrops(t *testing.T) {
	home := t.TempDir()
	if err := os.WriteFile(filepath.Join(home, "events"), nil, 0o644); err != nil { // a file where the directory goes
		t.Fatal(err)
	}
	var warned []string
	l := event.Open(jobstore.Paths{Home: home, Repo: "repo", JobID: "job-1"}, time.Now, func(m string) { warned = append(warned, m) })
	l.Emit(event.PhaseStarted{Phase: "map", Items: 1})
	l.Emit(event.PhaseCompleted{Phase: "map"})
	l.Close()
	if len(warned) != 1 || !strings.Contains(warned[0], "event log unavailable") {
		t.Errorf("warnings %q, want one", warned)
	}
}
