package jobstore_test

import (
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prodigy-action/prodigy-action/jobstore"
)

// inMemory counts the state's items in memory.
func inMemory(s *jobstore.State, _ *jobstore.Checkpoint) int { return s.InMemory() }

// TestEvictedRowsAreReadBack drops every item not held from memory and
// checks that each change, the items' order and every field come back
// from the snapshot and the journal: through Hold, Scan, Read, the
// journal's compaction (rows copied from the journal into the new
// snapshot) and LoadCheckpoint.
func TestEvictedRowsAreReadBack(t *testing.T) {
	p, s, cp, _ := journalJob(t, 40)
	s.EvictRows()
	if n := inMemory(s, cp); n != 0 {
		t.Fatalf("%d items in memory after EvictRows, want 0", n)
	}
	if s.Len() != 40 {
		t.Fatalf("Len %d, want 40", s.Len())
	}
	want := make([]jobstore.CheckpointItem, 40)
	s.Scan(func(_ int, it *jobstore.CheckpointItem) bool { want[it.Index] = *it; return true })
	big := strings.Repeat("x", 16<<10) // compactions within the loop (at 1 MiB)
	compactions := 0
	for round := range 60 {
		for _, k := range []int{round % 40, (round * 7) % 40} {
			it, err := s.Hold(k)
			if err != nil {
				t.Fatal(err)
			}
			if it.ItemID != fmt.Sprintf("item-%d", k) {
				t.Fatalf("Hold(%d) gave %s", k, it.ItemID)
			}
			before := fileSize(t, p.CheckpointJournal())
			err = s.UpdateItem(it, func(*jobstore.Checkpoint) {
				it.Attempts++
				it.Error = fmt.Sprintf("round %d %s", round, big)
				it.MergeCommit = fmt.Sprintf("%040d", round)
				it.State = jobstore.ItemDLQ
			})
			if err != nil {
				t.Fatal(err)
			}
			if before > 0 && fileSize(t, p.CheckpointJournal()) == 0 {
				compactions++
			}
			want[k] = *it
			s.Release(it)
		}
		if n := inMemory(s, cp); n != 0 {
			t.Fatalf("round %d: %d items in memory, want 0", round, n)
		}
	}
	if compactions == 0 {
		t.Fatal("the journal was never compacted while items were out of memory")
	}
	check := func(how string, got []*jobstore.CheckpointItem) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("%s: %d items, want %d", how, len(got), len(want))
		}
		for i, it := range got {
			w := want[i]
			if it.ItemID != w.ItemID || it.Attempts != w.Attempts || it.Error != w.Error || it.MergeCommit != w.MergeCommit ||
				it.State != w.State || it.DataOff != w.DataOff || it.DataLen != w.DataLen || it.Index != i {
				t.Fatalf("%s: item %d is %+v, want %+v", how, i, *it, w)
			}
		}
	}
	var scanned []*jobstore.CheckpointItem
	s.Scan(func(_ int, it *jobstore.CheckpointItem) bool { c := *it; scanned = append(scanned, &c); return true })
	check("Scan", scanned)
	loaded, err := jobstore.LoadCheckpoint(p)
	if err != nil {
		t.Fatal(err)
	}
	check("LoadCheckpoint", loaded.Items)
	var read []*jobstore.CheckpointItem
	s.Read(func(cp *jobstore.Checkpoint) {
		for _, it := range cp.Items {
			c := *it
			read = append(read, &c)
		}
	})
	check("Read", read)
	if got := s.Counts(); got.DLQ != 40 || got.Total != 40 {
		t.Fatalf("counts %+v, want 40 dlq of 40", got)
	}
	// The data of an item out of memory is still found by ItemData.
	it, err := s.Hold(3)
	if err != nil {
		t.Fatal(err)
	}
	data, err := s.ItemData(it)
	if err != nil || !strings.Contains(string(data), `"n":3`) {
		t.Fatalf("ItemData = %s, %v", data, err)
	}
	s.Release(it)
	// A whole rewrite while everything is out of memory copies every row.
	if err := s.UpdateHead(func(h *jobstore.CheckpointHead) { h.Phase = jobstore.PhaseReduce }); err != nil {
		t.Fatal(err)
	}
	if fileSize(t, p.CheckpointJournal()) != 0 {
		t.Fatal("UpdateHead did not write a snapshot")
	}
	if n := inMemory(s, cp); n != 0 {
		t.Fatalf("%d items in memory after Read and a snapshot, want 0", n)
	}
	loaded, err = jobstore.LoadCheckpoint(p)
	if err != nil {
		t.Fatal(err)
	}
	check("snapshot of rows out of memory", loaded.Items)
	if loaded.Phase != jobstore.PhaseReduce {
		t.Fatalf("phase %q", loaded.Phase)
	}
}

// TestHeldItemsStayInMemory: an item held is the same pointer until it is
// released, whatever is written meanwhile, and items appended through the
// journal leave memory once written.
func TestHeldItemsStayInMemory(t *testing.T) {
	p, s, cp, _ := journalJob(t, 5)
	s.EvictRows()
	held, err := s.Hold(2)
	if err != nil {
		t.Fatal(err)
	}
	var batch []*jobstore.CheckpointItem
	for i := 5; i < 1005; i++ {
		batch = append(batch, &jobstore.CheckpointItem{ItemOutcome: jobstore.ItemOutcome{ItemID: fmt.Sprintf("item-%d", i), State: jobstore.ItemPending}, Index: i,
			Data: []byte(fmt.Sprintf(`{"n":%d}`, i))})
	}
	if err := s.UpdateItems(func(c *jobstore.Checkpoint, _ func(*jobstore.CheckpointItem)) { c.Items = append(c.Items, batch...) }); err != nil {
		t.Fatal(err)
	}
	if err := s.UpdateHead(func(h *jobstore.CheckpointHead) { h.Phase = jobstore.PhaseMap }); err != nil {
		t.Fatal(err)
	}
	again, err := s.Hold(2)
	if err != nil {
		t.Fatal(err)
	}
	if again != held {
		t.Fatal("a held item was read back as a new value")
	}
	if n := inMemory(s, cp); n != 1 {
		t.Fatalf("%d items in memory, want 1 (the held one)", n)
	}
	s.Release(again)
	s.Release(held)
	if n := inMemory(s, cp); n != 0 {
		t.Fatalf("%d items in memory after its releases, want 0", n)
	}
	if got := s.Counts(); got.Total != 1005 || got.Pending != 1005 {
		t.Fatalf("counts %+v", got)
	}
	loaded, err := jobstore.LoadCheckpoint(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(loaded.Items) != 1005 || loaded.Items[1004].ItemID != "item-1004" {
		t.Fatalf("loaded %d items", len(loaded.Items))
	}
	data, err := jobstore.NewItemDataReader(p).Data(loaded.Items[1004])
	if err != nil || string(data) != `{"n":1004}` {
		t.Fatalf("data %s, %v", data, err)
	}
}

// TestBulkAppendIsDurableWithTheNextSnapshot: items added with BulkAppend
// leave memory at once, are not in the checkpoint on disk until the next
// whole write (a crash before it finds none of them), and are there,
// data and all, after it.
func TestBulkAppendIsDurableWithTheNextSnapshot(t *testing.T) {
	p, s, cp, _ := journalJob(t, 5)
	s.EvictRows()
	for b := range 3 {
		var batch []*jobstore.CheckpointItem
		for i := 5 + b*400; i < 5+(b+1)*400; i++ {
			batch = append(batch, &jobstore.CheckpointItem{ItemOutcome: jobstore.ItemOutcome{ItemID: fmt.Sprintf("item-%d", i), Label: "l\u00e9 \"quoted\"", State: jobstore.ItemPending}, Index: i,
				Data: []byte(fmt.Sprintf(`{"n":%d}`, i))})
		}
		if err := s.BulkAppend(batch); err != nil {
			t.Fatal(err)
		}
	}
	if n := inMemory(s, cp); n != 0 {
		t.Fatalf("%d items in memory after BulkAppend, want 0", n)
	}
	if s.Len() != 1205 || s.Counts().Pending != 1205 {
		t.Fatalf("Len %d, counts %+v", s.Len(), s.Counts())
	}
	onDisk, err := jobstore.LoadCheckpoint(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(onDisk.Items) != 5 {
		t.Fatalf("before the snapshot the checkpoint on disk has %d items, want 5", len(onDisk.Items))
	}
	var seen int
	s.Scan(func(pos int, it *jobstore.CheckpointItem) bool {
		if it.ItemID != fmt.Sprintf("item-%d", pos) {
			t.Fatalf("Scan: position %d holds %s", pos, it.ItemID)
		}
		seen++
		return true
	})
	if seen != 1205 {
		t.Fatalf("Scan saw %d items", seen)
	}
	if err := s.UpdateHead(func(h *jobstore.CheckpointHead) { h.SetupCompleted = true }); err != nil {
		t.Fatal(err)
	}
	onDisk, err = jobstore.LoadCheckpoint(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(onDisk.Items) != 1205 {
		t.Fatalf("after the snapshot the checkpoint has %d items, want 1205", len(onDisk.Items))
	}
	it := onDisk.Items[1100]
	if it.ItemID != "item-1100" || it.Label != "l\u00e9 \"quoted\"" || it.Index != 1100 {
		t.Fatalf("item 1100 read back as %+v", *it)
	}
	data, err := jobstore.NewItemDataReader(p).Data(it)
	if err != nil || string(data) != `{"n":1100}` {
		t.Fatalf("data %s, %v", data, err)
	}
	held, err := s.Hold(1204)
	if err != nil || held.ItemID != "item-1204" {
		t.Fatalf("Hold after the snapshot: %v, %v", held, err)
	}
	s.Release(held)
}

// TestOpenStateReadsRowsInPlace opens a checkpoint with a journal
// (changed and appended items, a torn last line) without reading its
// items into memory, and checks that every item, the counts and the
// job-level fields are what LoadCheckpoint reads, before and after the
// opened state's first write; and that a checkpoint whose "items" is not
// its last field (written by hand or another tool) opens the same.
func TestOpenStateReadsRowsInPlace(t *testing.T) {
	p, s, cp, _ := journalJob(t, 30)
	for k := range 10 {
		it := cp.Items[k*3]
		if err := s.UpdateItem(it, func(c *jobstore.Checkpoint) {
			it.State, it.Attempts, it.Error = jobstore.ItemMerged, 2, fmt.Sprintf("e%d", k)
			c.NextAgent = 7 + k
		}); err != nil {
			t.Fatal(err)
		}
	}
	late := &jobstore.CheckpointItem{ItemOutcome: jobstore.ItemOutcome{ItemID: "late", State: jobstore.ItemPending}, Index: 30, Data: []byte(`{"late":true}`)}
	if err := s.UpdateItems(func(c *jobstore.Checkpoint, _ func(*jobstore.CheckpointItem)) { c.Items = append(c.Items, late) }); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(p.CheckpointJournal(), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"v":999,"pos":1,"item":{"item_id":"torn`)
	f.Close()
	same := func(how string, o *jobstore.State, ocp *jobstore.Checkpoint) {
		t.Helper()
		want, err := jobstore.LoadCheckpoint(p)
		if err != nil {
			t.Fatal(err)
		}
		var got []*jobstore.CheckpointItem
		if err := o.Scan(func(_ int, it *jobstore.CheckpointItem) bool { c := *it; got = append(got, &c); return true }); err != nil {
			t.Fatal(err)
		}
		if mustJSON(t, got) != mustJSON(t, want.Items) {
			t.Fatalf("%s: items\n%s\nwant\n%s", how, mustJSON(t, got), mustJSON(t, want.Items))
		}
		if o.Counts() != want.Counts() {
			t.Fatalf("%s: counts %+v, want %+v", how, o.Counts(), want.Counts())
		}
		if ocp.NextAgent != want.NextAgent || ocp.JobID != want.JobID || ocp.CheckpointVersion != want.CheckpointVersion {
			t.Fatalf("%s: head next_agent %d version %d, want %d %d", how, ocp.NextAgent, ocp.CheckpointVersion, want.NextAgent, want.CheckpointVersion)
		}
	}
	o, ocp, err := jobstore.OpenState(p, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	if n := inMemory(o, ocp); n != 0 {
		t.Fatalf("%d items in memory after OpenState, want 0", n)
	}
	same("opened", o, ocp)
	held, err := o.Hold(30)
	if err != nil {
		t.Fatal(err)
	}
	if data, err := o.ItemData(held); err != nil || string(data) != `{"late":true}` {
		t.Fatalf("data of an appended item: %s, %v", data, err)
	}
	o.Release(held)
	if err := o.UpdateHead(func(h *jobstore.CheckpointHead) { h.Phase = jobstore.PhaseMap }); err != nil {
		t.Fatal(err)
	}
	if fileSize(t, p.CheckpointJournal()) != 0 {
		t.Fatal("the opened state's first write was not a snapshot")
	}
	o.Close()
	o2, ocp2, err := jobstore.OpenState(p, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	same("after the first write", o2, ocp2)
	o2.Close()

	// The same checkpoint with its fields in alphabetical order.
	var doc map[string]any
	if err := json.Unmarshal(mustRead(t, p.Checkpoint()), &doc); err != nil {
		t.Fatal(err)
	}
	doc["status"] = "failed"
	sorted, _ := json.Marshal(doc)
	if err := os.WriteFile(p.Checkpoint(), sorted, 0o600); err != nil {
		t.Fatal(err)
	}
	o3, ocp3, err := jobstore.OpenState(p, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	defer o3.Close()
	same("fields sorted", o3, ocp3)
	if ocp3.Status != jobstore.StatusFailed || ocp3.Vars == nil {
		t.Fatalf("fields after items not read: status %q, vars %v", ocp3.Status, ocp3.Vars)
	}
}

// TestRewriteKeepsOnlyWhatChanged: Rewrite sees every item, keeps the
// ones it changed in memory until the next write, and writes them then.
func TestRewriteKeepsOnlyWhatChanged(t *testing.T) {
	p, s, cp, _ := journalJob(t, 20)
	s.EvictRows()
	seen := 0
	err := s.Rewrite(nil, func(it *jobstore.CheckpointItem) bool {
		seen++
		if it.Index%5 != 0 {
			return false
		}
		it.State = jobstore.ItemSkipped
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	if seen != 20 || inMemory(s, cp) != 4 {
		t.Fatalf("saw %d items, %d in memory; want 20 and 4", seen, inMemory(s, cp))
	}
	if got := s.Counts(); got.Skipped != 4 || got.Pending != 16 {
		t.Fatalf("counts %+v", got)
	}
	if err := s.UpdateHead(func(*jobstore.CheckpointHead) {}); err != nil {
		t.Fatal(err)
	}
	if inMemory(s, cp) != 0 {
		t.Fatal("changed items stayed in memory after their write")
	}
	loaded, err := jobstore.LoadCheckpoint(p)
	if err != nil {
		t.Fatal(err)
	}
	if n := loaded.Counts(); n.Skipped != 4 {
		t.Fatalf("on disk: %+v", n)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestRowHasAnswersForEveryEncoding: the prefilter Rewrite and Next take
// never refuses a row that holds what it looks for, for rows of the
// snapshot's encoder and of the journal's (json.Marshal), hostile text in
// the item's strings included.
func TestRowHasAnswersForEveryEncoding(t *testing.T) {
	_, s, cp, _ := journalJob(t, 12)
	states := []jobstore.ItemState{jobstore.ItemPending, jobstore.ItemRunning, jobstore.ItemMerged, jobstore.ItemSkipped, jobstore.ItemDLQ}
	mutate := func(k int, it *jobstore.CheckpointItem) {
		it.State = states[k%len(states)]
		it.Error = `"state":"running" \"state\":\"pending\"`
		it.Label = "spend_ceiling_usd pending_dlq_record"
		if k%3 == 0 {
			it.SpendCeiling = 0.25
		}
		if k%4 == 0 {
			it.PendingRecord = []byte(`{"item_id":"x","state":"running"}`)
		}
	}
	// Half the items changed through the journal (json.Marshal rows) ...
	for k := 0; k < 6; k++ {
		it := cp.Items[k]
		if err := s.UpdateItem(it, func(*jobstore.Checkpoint) { mutate(k, it) }); err != nil {
			t.Fatal(err)
		}
	}
	// ... half through a snapshot (the hand encoder's rows).
	if err := s.Update(func(c *jobstore.Checkpoint) {
		for k := 6; k < 12; k++ {
			mutate(k, c.Items[k])
		}
	}); err != nil {
		t.Fatal(err)
	}
	for k := 0; k < 3; k++ { // and once more in the journal after it
		it := cp.Items[k]
		if err := s.UpdateItem(it, func(*jobstore.Checkpoint) { it.Attempts++ }); err != nil {
			t.Fatal(err)
		}
	}
	s.EvictRows()
	var rows [][]byte
	err := s.Rewrite(func(row []byte) bool { rows = append(rows, append([]byte(nil), row...)); return true },
		func(*jobstore.CheckpointItem) bool { return false })
	if err != nil || len(rows) != 12 {
		t.Fatalf("Rewrite saw %d rows (%v)", len(rows), err)
	}
	for i, row := range rows {
		var it jobstore.CheckpointItem
		if err := json.Unmarshal(row, &it); err != nil {
			t.Fatal(err)
		}
		for _, st := range states {
			if it.State == st && !jobstore.RowHas(row, "state", string(st)) {
				t.Errorf("row %d (%s) refused for state %s: %s", i, it.State, st, row)
			}
		}
		if it.SpendCeiling != 0 && !jobstore.RowHas(row, "spend_ceiling_usd") {
			t.Errorf("row %d refused for its spend ceiling: %s", i, row)
		}
		if it.PendingRecord != nil && !jobstore.RowHas(row, "pending_dlq_record") {
			t.Errorf("row %d refused for its pending record: %s", i, row)
		}
	}
}

// TestEvictionUnderConcurrentChanges: workers hold, change and release
// items at once (so each item has one changer at a time, as the engine
// runs it), with changes large enough to compact the journal several
// times, while readers scan; every item out of memory must read back as
// its last change, in the state and on disk.
func TestEvictionUnderConcurrentChanges(t *testing.T) {
	const n, workers, rounds = 64, 6, 120
	p, s, cp, _ := journalJob(t, n)
	s.EvictRows()
	big := strings.Repeat("y", 3<<10)
	want := make([]int, n) // attempts per item
	var mu sync.Mutex
	var wg sync.WaitGroup
	stop := make(chan struct{})
	go func() { // readers
		for {
			select {
			case <-stop:
				return
			default:
			}
			_ = s.Scan(func(int, *jobstore.CheckpointItem) bool { return true })
			_, _ = s.Next(0, func(row []byte) bool { return jobstore.RowHas(row, "state", "dlq") }, func(it *jobstore.CheckpointItem) bool { return it.State == jobstore.ItemDLQ })
		}
	}()
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range rounds {
				pos := (w*rounds + r*7) % n
				if pos%workers != w { // each position has one worker
					pos = (pos/workers)*workers + w
					if pos >= n {
						continue
					}
				}
				it, err := s.Hold(pos)
				if err != nil {
					t.Error(err)
					return
				}
				if err := s.UpdateItem(it, func(*jobstore.Checkpoint) {
					it.Attempts++
					it.Error = fmt.Sprintf("w%d r%d %s", w, r, big)
					it.State = jobstore.ItemDLQ
				}); err != nil {
					t.Error(err)
				}
				mu.Lock()
				want[pos] = it.Attempts
				mu.Unlock()
				s.Release(it)
			}
		}()
	}
	wg.Wait()
	close(stop)
	if n := inMemory(s, cp); n != 0 {
		t.Errorf("%d items in memory after every release", n)
	}
	check := func(how string, attempts func(pos int) int) {
		t.Helper()
		for pos := range n {
			if got := attempts(pos); got != want[pos] {
				t.Errorf("%s: item %d has %d attempts, want %d", how, pos, got, want[pos])
			}
		}
	}
	var scanned []int
	if err := s.Scan(func(_ int, it *jobstore.CheckpointItem) bool { scanned = append(scanned, it.Attempts); return true }); err != nil {
		t.Fatal(err)
	}
	check("Scan", func(pos int) int { return scanned[pos] })
	loaded, err := jobstore.LoadCheckpoint(p)
	if err != nil {
		t.Fatal(err)
	}
	check("LoadCheckpoint", func(pos int) int { return loaded.Items[pos].Attempts })
	o, _, err := jobstore.OpenState(p, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	var opened []int
	if err := o.Scan(func(_ int, it *jobstore.CheckpointItem) bool { opened = append(opened, it.Attempts); return true }); err != nil {
		t.Fatal(err)
	}
	check("OpenState", func(pos int) int { return opened[pos] })
}

// TestUpdateItemTakesBackAPointerKeptPastItsCall: a pointer obtained from
// Read and kept after the item left memory (only Hold's stay valid, but a
// caller may get this wrong) is taken back by UpdateItem when nothing
// changed the item since, so its change is written, not lost.
func TestUpdateItemTakesBackAPointerKeptPastItsCall(t *testing.T) {
	p, s, cp, _ := journalJob(t, 10)
	s.EvictRows()
	var kept *jobstore.CheckpointItem
	if err := s.Read(func(c *jobstore.Checkpoint) { kept = c.Items[4] }); err != nil {
		t.Fatal(err)
	}
	if err := s.UpdateHead(func(*jobstore.CheckpointHead) {}); err != nil {
		t.Fatal(err)
	}
	if n := inMemory(s, cp); n != 0 {
		t.Fatalf("%d items in memory, want 0", n)
	}
	if err := s.UpdateItem(kept, func(*jobstore.Checkpoint) { kept.Attempts, kept.State = 9, jobstore.ItemMerged }); err != nil {
		t.Fatal(err)
	}
	loaded, err := jobstore.LoadCheckpoint(p)
	if err != nil {
		t.Fatal(err)
	}
	if it := loaded.Items[4]; it.Attempts != 9 || it.State != jobstore.ItemMerged {
		t.Fatalf("item 4 on disk: %+v", *it)
	}
	if got := s.Counts(); got.Merged != 1 || got.Pending != 9 {
		t.Fatalf("counts %+v", got)
	}
}

// TestEvictingStateHoldsNothingPerItem runs a job of 2,000 items the way
// the engine does (every item held, changed through the journal and
// released; snapshots in between; BulkAppend; a redrive page through
// UpdateItemsAt), with pages of 8 row locations and 3 of them in memory
// (TestMain): once items are released the state holds no item and no
// chunk for them, and never more than 3 pages of locations, however many
// items; a reopened state (OpenState, then EvictRows as the engine calls
// it) has every item, as LoadCheckpoint reads them.
func TestEvictingStateHoldsNothingPerItem(t *testing.T) {
	const n = 2000
	p, s, _, _ := journalJob(t, n)
	s.EvictRows()
	check := func(when string) {
		t.Helper()
		chunks, pages := s.Footprint()
		if s.InMemory() != 0 || chunks != 0 || pages > 3 {
			t.Fatalf("%s: %d items, %d chunks, %d pages of locations in memory", when, s.InMemory(), chunks, pages)
		}
	}
	check("after EvictRows")
	for i := range n {
		it, err := s.Hold(i)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.UpdateItem(it, func(*jobstore.Checkpoint) { it.State, it.Attempts = jobstore.ItemMerged, 1 }); err != nil {
			t.Fatal(err)
		}
		s.Release(it)
		if i%700 == 0 {
			if err := s.UpdateHead(func(h *jobstore.CheckpointHead) { h.NextAgent = i }); err != nil {
				t.Fatal(err)
			}
		}
	}
	check("after every item ran")
	var late []*jobstore.CheckpointItem
	for i := range 50 {
		late = append(late, &jobstore.CheckpointItem{ItemOutcome: jobstore.ItemOutcome{ItemID: fmt.Sprintf("late-%d", i), State: jobstore.ItemPending}, Index: n + i})
	}
	if err := s.BulkAppend(late); err != nil {
		t.Fatal(err)
	}
	err := s.UpdateItemsAt([]int{5, 1500}, func(items jobstore.ItemsAt, touch func(*jobstore.CheckpointItem)) {
		if items.At(6) != nil || items.At(-1) != nil || items.At(items.Len()) != nil {
			t.Error("ItemsAt gave an item it was not asked for")
		}
		for _, pos := range []int{5, 1500} {
			it := items.At(pos)
			touch(it)
			it.State = jobstore.ItemDLQ
		}
		items.Append(&jobstore.CheckpointItem{ItemOutcome: jobstore.ItemOutcome{ItemID: "redriven", State: jobstore.ItemPending}, Index: items.Len()})
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.UpdateHead(func(*jobstore.CheckpointHead) {}); err != nil {
		t.Fatal(err)
	}
	check("after a bulk append, a redrive page and a snapshot")
	want, err := jobstore.LoadCheckpoint(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(want.Items) != n+51 || want.Items[5].State != jobstore.ItemDLQ || want.Items[6].State != jobstore.ItemMerged || want.Items[n+50].ItemID != "redriven" {
		t.Fatalf("the checkpoint holds %d items", len(want.Items))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2, cp2, err := jobstore.OpenState(p, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	s2.EvictRows()
	if cp2.Items != nil || s2.Len() != n+51 {
		t.Fatalf("reopened: %d items in the checkpoint, Len %d", len(cp2.Items), s2.Len())
	}
	var got []jobstore.CheckpointItem
	if err := s2.Scan(func(_ int, it *jobstore.CheckpointItem) bool { got = append(got, *it); return true }); err != nil {
		t.Fatal(err)
	}
	for i := range got {
		if mustJSON(t, got[i]) != mustJSON(t, *want.Items[i]) {
			t.Fatalf("item %d reopened %s, want %s", i, mustJSON(t, got[i]), mustJSON(t, *want.Items[i]))
		}
	}
	if chunks, pages := s2.Footprint(); s2.InMemory() != 0 || chunks != 0 || pages > 3 {
		t.Fatalf("reopened: %d items, %d chunks, %d pages in memory", s2.InMemory(), chunks, pages)
	}
}

// TestBulkAppendOfEvictedItemsAllocatesLittle loads 20,000 items as the
// engine does (EvictRows, then BulkAppend in batches): what it allocates
// per item is the item's row, not memory for its place (a chunk of the
// item table made and dropped per item was 8 KiB each).
func TestBulkAppendOfEvictedItemsAllocatesLittle(t *testing.T) {
	_, s, _, _ := journalJob(t, 0)
	s.EvictRows()
	const n, batch = 20000, 500
	items := make([]*jobstore.CheckpointItem, n)
	for i := range items {
		items[i] = &jobstore.CheckpointItem{ItemOutcome: jobstore.ItemOutcome{ItemID: fmt.Sprintf("item-%d", i), State: jobstore.ItemPending}, Index: i}
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := 0; i < n; i += batch {
		if err := s.BulkAppend(items[i : i+batch]); err != nil {
			t.Fatal(err)
		}
	}
	runtime.ReadMemStats(&after)
	if per := (after.TotalAlloc - before.TotalAlloc) / n; per > 1024 {
		t.Fatalf("BulkAppend allocated %d bytes per item", per)
	}
	if s.Len() != n || s.InMemory() != 0 {
		t.Fatalf("Len %d, %d in memory", s.Len(), s.InMemory())
	}
}
