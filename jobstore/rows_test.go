package jobstore_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/prodigy-action/prodigy-action/jobstore"
)

// inMemory counts the non-nil entries of cp.Items (the checkpoint the
// state wraps), read under the state's lock.
func inMemory(s *jobstore.State, cp *jobstore.Checkpoint) int {
	var n int
	s.ReadHead(func(*jobstore.CheckpointHead) {
		for _, it := range cp.Items {
			if it != nil {
				n++
			}
		}
	})
	return n
}

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
// released, whatever is written meanwhile, and items appended in batches
// leave memory once written.
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
	if err := s.AppendItems(batch); err != nil {
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
