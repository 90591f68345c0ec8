package jobstore_test

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prodigy-action/prodigy-action/jobstore"
)

// testClock is a settable clock.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *testClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// journalJob makes a map-phase job of n pending items and writes its
// snapshot.
func journalJob(t testing.TB, n int) (jobstore.Paths, *jobstore.State, *jobstore.Checkpoint, *testClock) {
	t.Helper()
	p := jobstore.Paths{Home: t.TempDir(), Repo: "r", JobID: "j"}
	cp := &jobstore.Checkpoint{CheckpointHead: jobstore.CheckpointHead{FormatVersion: jobstore.CheckpointFormat, JobID: "j", Repo: "r", StartedAt: t0,
		Status: jobstore.StatusRunning, Phase: jobstore.PhaseMap, SetupCompleted: true, Vars: map[string]string{}}}
	for i := range n {
		cp.Items = append(cp.Items, &jobstore.CheckpointItem{ItemOutcome: jobstore.ItemOutcome{ItemID: fmt.Sprintf("item-%d", i), State: jobstore.ItemPending},
			Index: i, Data: json.RawMessage(fmt.Sprintf(`{"n":%d,"pad":"0123456789012345678901234567890123456789"}`, i))})
	}
	clock := &testClock{t: t0}
	s := jobstore.NewState(p, cp, clock.now)
	if err := s.Update(func(*jobstore.Checkpoint) {}); err != nil {
		t.Fatal(err)
	}
	return p, s, cp, clock
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	st, err := os.Stat(path)
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

func TestItemUpdatesAreJournaledAndReplayed(t *testing.T) {
	p, s, cp, _ := journalJob(t, 50)
	snapshot, err := os.ReadFile(p.Checkpoint())
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 10 {
		it := cp.Items[i]
		wg.Go(func() {
			if err := s.UpdateItem(it, func(cp *jobstore.Checkpoint) {
				it.State, it.Attempts = jobstore.ItemMerged, 2
				cp.NextAgent = max(cp.NextAgent, i+1)
			}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if now, _ := os.ReadFile(p.Checkpoint()); string(now) != string(snapshot) {
		t.Error("an item update rewrote checkpoint.json")
	}
	got, err := jobstore.LoadCheckpoint(p)
	if err != nil {
		t.Fatal(err)
	}
	n := got.Counts()
	if n.Merged != 10 || n.Pending != 40 || got.NextAgent != 10 {
		t.Fatalf("replayed counts %+v, next_agent %d", n, got.NextAgent)
	}
	checkSummary(t, p, n)
	// The data is in items.jsonl, not in the checkpoint.
	if strings.Contains(string(mustRead(t, p.Checkpoint())), "0123456789") {
		t.Error("checkpoint.json holds item data")
	}
	rd := jobstore.NewItemDataReader(p)
	defer rd.Close()
	for i, it := range got.Items {
		var d struct{ N int }
		data, err := rd.Data(it)
		if err == nil {
			err = json.Unmarshal(data, &d)
		}
		if err != nil || d.N != i || it.Data != nil {
			t.Fatalf("item %d data %s (%v), inline %s", i, data, err, it.Data)
		}
		if live, err := s.ItemData(cp.Items[i]); err != nil || string(live) != string(data) {
			t.Fatalf("State.ItemData(item %d) = %s, %v; want %s", i, live, err, data)
		}
	}

	// A torn last line (crash during the append) is ignored.
	f, err := os.OpenFile(p.CheckpointJournal(), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = f.WriteString(`{"v":999,"pos":20,"item":{"item_id":"item-20","state":"mer`)
	_ = f.Close()
	got, err = jobstore.LoadCheckpoint(p)
	if err != nil {
		t.Fatal(err)
	}
	if got.Items[20].State != jobstore.ItemPending || got.Counts().Merged != 10 {
		t.Errorf("a torn journal line was applied: %+v", got.Items[20])
	}
	checkSummary(t, p, got.Counts())

	// A full Update writes a snapshot and empties the journal; entries a
	// crash left behind (not newer than the snapshot) are not applied.
	old, _ := os.ReadFile(p.CheckpointJournal())
	old = old[:strings.LastIndexByte(string(old), '\n')+1] // without the torn line
	if err := s.Update(func(cp *jobstore.Checkpoint) { cp.Phase = jobstore.PhaseReduce }); err != nil {
		t.Fatal(err)
	}
	if sz := fileSize(t, p.CheckpointJournal()); sz != 0 {
		t.Errorf("journal is %d bytes after a snapshot", sz)
	}
	if err := s.UpdateItem(cp.Items[0], func(*jobstore.Checkpoint) { cp.Items[0].State = jobstore.ItemDLQ }); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p.CheckpointJournal()+".tmp", append(old, mustRead(t, p.CheckpointJournal())...), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(p.CheckpointJournal()+".tmp", p.CheckpointJournal()); err != nil {
		t.Fatal(err)
	}
	got, err = jobstore.LoadCheckpoint(p)
	if err != nil {
		t.Fatal(err)
	}
	if got.Phase != jobstore.PhaseReduce || got.Items[0].State != jobstore.ItemDLQ || got.Counts().Merged != 9 {
		t.Errorf("after snapshot + stale journal: phase %s, item 0 %s, counts %+v", got.Phase, got.Items[0].State, got.Counts())
	}
	checkSummary(t, p, got.Counts())
	if s.Counts() != got.Counts() {
		t.Errorf("State.Counts %+v, checkpoint on disk %+v", s.Counts(), got.Counts())
	}
}

// checkSummary: LoadSummary reports the counts want and no items.
func checkSummary(t *testing.T, p jobstore.Paths, want jobstore.Counts) {
	t.Helper()
	sum, err := jobstore.LoadSummary(p)
	if err != nil {
		t.Fatal(err)
	}
	if sum.ItemCounts == nil || *sum.ItemCounts != want || sum.Items != nil {
		t.Errorf("LoadSummary counts %+v (items %d), want %+v", sum.ItemCounts, len(sum.Items), want)
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestItemUpdateCostDoesNotGrowWithJob: an item change appends about the
// same number of bytes whether the job has 10 or 20,000 items.
func TestItemUpdateCostDoesNotGrowWithJob(t *testing.T) {
	perUpdate := func(n int) int64 {
		p, s, cp, _ := journalJob(t, n)
		before := fileSize(t, p.Checkpoint())
		for i := range 5 {
			it := cp.Items[i]
			if err := s.UpdateItem(it, func(*jobstore.Checkpoint) { it.State = jobstore.ItemRunning }); err != nil {
				t.Fatal(err)
			}
		}
		if fileSize(t, p.Checkpoint()) != before {
			t.Fatalf("n=%d: snapshot rewritten by item updates", n)
		}
		return fileSize(t, p.CheckpointJournal()) / 5
	}
	small, large := perUpdate(10), perUpdate(20000)
	if large > small+16 || small == 0 {
		t.Errorf("bytes written per item update: %d at n=10, %d at n=20000", small, large)
	}
}

func TestJournalCompactsWhenItOutgrowsTheSnapshot(t *testing.T) {
	p, s, cp, _ := journalJob(t, 3)
	big := strings.Repeat("e", 16<<10) // large lines: compaction after ~64 updates
	compacted := false
	for i := 0; i < 20000 && !compacted; i++ {
		it := cp.Items[i%3]
		if err := s.UpdateItem(it, func(*jobstore.Checkpoint) { it.Attempts, it.Error = i, big }); err != nil {
			t.Fatal(err)
		}
		compacted = i > 0 && fileSize(t, p.CheckpointJournal()) == 0
	}
	if !compacted {
		t.Fatal("the journal was never compacted")
	}
	got, err := jobstore.LoadCheckpoint(p)
	if err != nil {
		t.Fatal(err)
	}
	var want []int
	s.Read(func(cp *jobstore.Checkpoint) {
		for _, it := range cp.Items {
			want = append(want, it.Attempts)
		}
	})
	for i, it := range got.Items {
		if it.Attempts != want[i] {
			t.Errorf("item %d attempts %d, want %d", i, it.Attempts, want[i])
		}
	}
}

func TestSessionFileIsThrottledForItemUpdates(t *testing.T) {
	p, s, cp, clock := journalJob(t, 5)
	sessionUpdated := func() time.Time {
		var sess jobstore.Session
		if err := json.Unmarshal(mustRead(t, p.Session()), &sess); err != nil {
			t.Fatal(err)
		}
		return sess.UpdatedAt
	}
	first := sessionUpdated()
	clock.add(100 * time.Millisecond)
	it := cp.Items[0]
	if err := s.UpdateItem(it, func(*jobstore.Checkpoint) { it.State = jobstore.ItemMerged }); err != nil {
		t.Fatal(err)
	}
	if got := sessionUpdated(); !got.Equal(first) {
		t.Errorf("session rewritten %v after the last write", got.Sub(first))
	}
	clock.add(jobstore.SessionInterval)
	if err := s.UpdateItem(it, func(*jobstore.Checkpoint) { it.Commits = 1 }); err != nil {
		t.Fatal(err)
	}
	if got := sessionUpdated(); !got.After(first) {
		t.Error("session not rewritten after SessionInterval")
	}
}

// BenchmarkUpdateItem measures one item change (journal append + fsync)
// in jobs of different sizes: the cost should not depend on n.
func BenchmarkUpdateItem(b *testing.B) {
	for _, n := range []int{1000, 10000, 100000} {
		b.Run(fmt.Sprintf("items=%d", n), func(b *testing.B) {
			_, s, cp, _ := journalJob(b, n)
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				it := cp.Items[i%n]
				if err := s.UpdateItem(it, func(*jobstore.Checkpoint) { it.Attempts++ }); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkUpdateSnapshot is the cost of a job-level change (a whole
// snapshot), for comparison: it grows with n, which is why item changes
// use the journal.
func BenchmarkUpdateSnapshot(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("items=%d", n), func(b *testing.B) {
			_, s, cp, _ := journalJob(b, n)
			for i := 0; b.Loop(); i++ {
				it := cp.Items[i%n]
				if err := s.Update(func(*jobstore.Checkpoint) { it.Attempts++ }); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestJournalGapIsNotApplied: entries that do not continue the snapshot's
// version (a reader racing a compaction, or a lost append) are not applied.
func TestJournalGapIsNotApplied(t *testing.T) {
	p, _, _, _ := journalJob(t, 3)
	cp, err := jobstore.LoadCheckpoint(p)
	if err != nil {
		t.Fatal(err)
	}
	line := fmt.Sprintf(`{"v":%d,"pos":1,"counts":{"total":3,"merged":1,"pending":2},"item":{"item_id":"item-1","state":"merged","attempts":1,"commits":1,"duration_ms":0,"index":1,"data":null}}`+"\n", cp.CheckpointVersion+2)
	if err := os.WriteFile(p.CheckpointJournal(), []byte(line), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := jobstore.LoadCheckpoint(p)
	if err != nil {
		t.Fatal(err)
	}
	if got.Items[1].State != jobstore.ItemPending {
		t.Errorf("an entry after a version gap was applied: %+v", got.Items[1])
	}
	// The summary does not take the counts of an entry after a gap either,
	// nor does a streamed read (after the retries a reader racing a
	// compaction gets).
	checkSummary(t, p, jobstore.Counts{Total: 3, Pending: 3})
	if head, items := streamed(t, p); items[1].State != jobstore.ItemPending || head.ItemCounts.Merged != 0 {
		t.Errorf("streamed: an entry after a version gap was applied: %+v, counts %+v", items[1], head.ItemCounts)
	}
}

// TestFormat1CheckpointIsReadAndRewritten: a checkpoint written by the
// previous version (format 1: data inline, no counts) loads, summarises
// and resumes; its next snapshot moves the data to items.jsonl.
func TestFormat1CheckpointIsReadAndRewritten(t *testing.T) {
	p := jobstore.Paths{Home: t.TempDir(), Repo: "r", JobID: "j"}
	v1 := `{"format_version": 1, "checkpoint_version": 3, "job_id": "j", "repo": "r", "status": "running", "phase": "map",
  "setup_completed": true, "vars": {}, "items": [
    {"item_id": "a", "state": "merged", "attempts": 1, "commits": 1, "duration_ms": 5, "cost_usd": 0, "index": 0, "data": {"n": 0}},
    {"item_id": "b", "state": "pending", "attempts": 0, "commits": 0, "duration_ms": 0, "cost_usd": 0, "index": 1, "data": {"n": 1}}]}`
	if err := os.MkdirAll(p.JobStateDir(), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p.Checkpoint(), []byte(v1), 0o600); err != nil {
		t.Fatal(err)
	}
	want := jobstore.Counts{Total: 2, Merged: 1, Pending: 1}
	checkSummary(t, p, want)
	sameAsLoaded(t, p) // streamed from the whole load: no counts to stream by
	cp, err := jobstore.LoadCheckpoint(p)
	if err != nil {
		t.Fatal(err)
	}
	if string(cp.Items[1].Data) != `{"n": 1}` {
		t.Fatalf("format 1 data %s", cp.Items[1].Data)
	}
	s := jobstore.NewState(p, cp, time.Now)
	if err := s.Update(func(*jobstore.Checkpoint) {}); err != nil {
		t.Fatal(err)
	}
	if err := s.UpdateItem(cp.Items[1], func(*jobstore.Checkpoint) { cp.Items[1].State = jobstore.ItemMerged }); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := jobstore.LoadCheckpoint(p)
	if err != nil {
		t.Fatal(err)
	}
	rd := jobstore.NewItemDataReader(p)
	defer rd.Close()
	data, err := rd.Data(got.Items[1])
	if got.FormatVersion != jobstore.CheckpointFormat || got.Items[1].Data != nil || err != nil || string(data) != `{"n": 1}` {
		t.Errorf("rewritten: format %d, inline %s, spooled %s (%v)", got.FormatVersion, got.Items[1].Data, data, err)
	}
	checkSummary(t, p, jobstore.Counts{Total: 2, Merged: 2})

	// A format this version does not know fails clearly.
	if err := os.WriteFile(p.Checkpoint(), []byte(`{"format_version": 3, "items": []}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := jobstore.LoadSummary(p); err == nil || !strings.Contains(err.Error(), "format 3 is not supported") {
		t.Errorf("format 3: %v", err)
	}
}

// TestUpdateItemsAppendsThroughTheJournal: items appended and changed by
// UpdateItems are journaled (no snapshot), replayed in order with their
// data, and counted.
func TestUpdateItemsAppendsThroughTheJournal(t *testing.T) {
	p, s, cp, _ := journalJob(t, 5)
	snapshot := mustRead(t, p.Checkpoint())
	for page := range 3 {
		err := s.UpdateItems(func(cp *jobstore.Checkpoint, touch func(*jobstore.CheckpointItem)) {
			touch(cp.Items[page])
			cp.Items[page].State = jobstore.ItemDLQ
			for k := range 4 {
				id := fmt.Sprintf("new-%d-%d", page, k)
				cp.Items = append(cp.Items, &jobstore.CheckpointItem{ItemOutcome: jobstore.ItemOutcome{ItemID: id, State: jobstore.ItemPending},
					Index: len(cp.Items), Data: json.RawMessage(fmt.Sprintf(`{"id":%q}`, id))})
			}
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if string(mustRead(t, p.Checkpoint())) != string(snapshot) {
		t.Error("UpdateItems rewrote the snapshot")
	}
	want := jobstore.Counts{Total: 17, DLQ: 3, Pending: 14}
	if s.Counts() != want {
		t.Errorf("State.Counts = %+v, want %+v", s.Counts(), want)
	}
	got, err := jobstore.LoadCheckpoint(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Items) != 17 || got.Counts() != want {
		t.Fatalf("replayed %d items, counts %+v", len(got.Items), got.Counts())
	}
	checkSummary(t, p, want)
	rd := jobstore.NewItemDataReader(p)
	defer rd.Close()
	for i, it := range got.Items[5:] {
		id := fmt.Sprintf("new-%d-%d", i/4, i%4)
		data, err := rd.Data(it)
		if it.ItemID != id || err != nil || string(data) != fmt.Sprintf(`{"id":%q}`, id) {
			t.Errorf("appended item %d = %s %s (%v), want %s", 5+i, it.ItemID, data, err, id)
		}
		if live, err := s.ItemData(cp.Items[5+i]); err != nil || string(live) != string(data) {
			t.Errorf("State.ItemData = %s, %v", live, err)
		}
	}
}

// TestSnapshotKeepsTheAttemptInFlight: an item whose attempt is running
// when the checkpoint is rewritten whole (an Update, or the journal's
// compaction) keeps its in-flight attempt, its lost attempts and its spend
// ceiling on disk, so a crash right after the rewrite still finds the
// attempt that was running (recorded as lost, its reserved spend counted).
// The snapshot's hand encoder once left the three out.
func TestSnapshotKeepsTheAttemptInFlight(t *testing.T) {
	p, s, cp, clock := journalJob(t, 3)
	it := cp.Items[1]
	since := clock.now()
	if err := s.UpdateItem(it, func(*jobstore.Checkpoint) {
		it.State, it.Attempts, it.Lost, it.SpendCeiling = jobstore.ItemRunning, 3, 1, 0.75
		it.InFlight, it.InFlightAgent, it.InFlightSince = 3, "agent-4", &since
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.Update(func(cp *jobstore.Checkpoint) { cp.PhaseCostUSD = 0.5 }); err != nil { // a whole rewrite
		t.Fatal(err)
	}
	if fileSize(t, p.CheckpointJournal()) != 0 {
		t.Fatal("the whole rewrite left a journal: the test reads the journal, not the snapshot")
	}
	got, err := jobstore.LoadCheckpoint(p)
	if err != nil {
		t.Fatal(err)
	}
	g := got.Items[1]
	if g.InFlight != 3 || g.InFlightAgent != "agent-4" || g.InFlightSince == nil || !g.InFlightSince.Equal(since) || g.Lost != 1 || g.SpendCeiling != 0.75 {
		t.Errorf("after a snapshot: in flight %d by %q since %v, lost %d, spend ceiling %v; want 3 by agent-4 since %v, 1, 0.75",
			g.InFlight, g.InFlightAgent, g.InFlightSince, g.Lost, g.SpendCeiling, since)
	}
}
