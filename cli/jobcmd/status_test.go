package jobcmd

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/prodigy-action/prodigy-action/cli/cmdutil"
	"github.com/prodigy-action/prodigy-action/jobstore"
	"github.com/prodigy-action/prodigy-action/runner"
)

// statusJob writes a finished job of n items (some merged, some in the
// DLQ, one updated through the journal) under home.
func statusJob(t testing.TB, home string, n int) string {
	t.Helper()
	p := jobstore.Paths{Home: home, Repo: "repo-0123abcd", JobID: "mapreduce-20261125_000000-abcdef"}
	t0 := time.Date(2026, 11, 25, 0, 0, 0, 0, time.UTC)
	cp := &jobstore.Checkpoint{CheckpointHead: jobstore.CheckpointHead{FormatVersion: jobstore.CheckpointFormat, JobID: p.JobID, Repo: p.Repo, StartedAt: t0,
		Status: jobstore.StatusCompleted, Phase: jobstore.PhaseMap, SetupCompleted: true, Vars: map[string]string{},
		ResultsBranch: "prodigy/" + p.JobID, WorkflowName: "status <&> test"}}
	for i := range n {
		st := jobstore.ItemMerged
		if i%3 == 1 {
			st = jobstore.ItemDLQ
		}
		cp.Items = append(cp.Items, &jobstore.CheckpointItem{ItemOutcome: jobstore.ItemOutcome{ItemID: fmt.Sprintf("item_%d", i), State: st,
			Attempts: 1 + i%2, CostUSD: float64(i) / 100, Error: map[bool]string{true: "exit 3: <bad> & \"quoted\"", false: ""}[st == jobstore.ItemDLQ]},
			Index: i, Data: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))})
	}
	s := jobstore.NewState(p, cp, func() time.Time { return t0 })
	if err := s.Update(func(*jobstore.Checkpoint) {}); err != nil {
		t.Fatal(err)
	}
	if n > 0 {
		it := cp.Items[0]
		if err := s.UpdateItem(it, func(*jobstore.Checkpoint) { it.Attempts = 7 }); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return p.JobID
}

// TestStatusJSONStreamsWhatStatusReturns: `status --json` streams its
// items, and prints byte for byte what encoding runner.Status's whole
// result prints, for an empty job, one item, and many.
func TestStatusJSONStreamsWhatStatusReturns(t *testing.T) {
	for _, n := range []int{0, 1, 250} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			home := t.TempDir()
			id := statusJob(t, home, n)
			res, err := runner.Status(home, id)
			if err != nil {
				t.Fatal(err)
			}
			var want, got bytes.Buffer
			if err := cmdutil.WriteJSON(&want, res); err != nil {
				t.Fatal(err)
			}
			if err := writeStatusJSON(&got, home, id); err != nil {
				t.Fatal(err)
			}
			if got.String() != want.String() {
				t.Errorf("streamed:\n%s\nwant:\n%s", got.String(), want.String())
			}
			var back runner.Result
			if err := json.Unmarshal(got.Bytes(), &back); err != nil || len(back.Items) != n {
				t.Errorf("streamed output is not the result: %d items, %v", len(back.Items), err)
			}
		})
	}
}
