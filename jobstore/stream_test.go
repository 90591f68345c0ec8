package jobstore_test

import (
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"testing"

	"github.com/prodigy-action/prodigy-action/jobstore"
)

// streamed is what StreamCheckpoint hands out, items copied.
func streamed(t *testing.T, p jobstore.Paths) (*jobstore.Checkpoint, []jobstore.CheckpointItem) {
	t.Helper()
	var head *jobstore.Checkpoint
	var items []jobstore.CheckpointItem
	err := jobstore.StreamCheckpoint(p, func(cp *jobstore.Checkpoint) error {
		if cp.Items != nil {
			t.Errorf("head has %d items", len(cp.Items))
		}
		head = cp
		return nil
	}, func(it *jobstore.CheckpointItem) error {
		if head == nil {
			t.Error("an item before the head")
		}
		items = append(items, *it)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return head, items
}

// sameAsLoaded checks that streaming gives what LoadCheckpoint loads:
// the same items in the same order and counts that describe them.
func sameAsLoaded(t *testing.T, p jobstore.Paths) {
	t.Helper()
	want, err := jobstore.LoadCheckpoint(p)
	if err != nil {
		t.Fatal(err)
	}
	head, items := streamed(t, p)
	if len(items) != len(want.Items) {
		t.Fatalf("streamed %d items, loaded %d", len(items), len(want.Items))
	}
	for i := range items {
		a, _ := json.Marshal(items[i])
		b, _ := json.Marshal(want.Items[i])
		if string(a) != string(b) {
			t.Errorf("item %d streamed %s, loaded %s", i, a, b)
		}
	}
	if head.ItemCounts == nil || *head.ItemCounts != want.Counts() {
		t.Errorf("head counts %+v, items' counts %+v", head.ItemCounts, want.Counts())
	}
	if head.CheckpointVersion != want.CheckpointVersion || !head.UpdatedAt.Equal(want.UpdatedAt) || head.NextAgent != want.NextAgent {
		t.Errorf("head version %d at %v agent %d, loaded %d at %v agent %d", head.CheckpointVersion, head.UpdatedAt, head.NextAgent,
			want.CheckpointVersion, want.UpdatedAt, want.NextAgent)
	}
	w := *want
	w.Items, w.ItemCounts, head.ItemCounts = nil, nil, nil
	if !reflect.DeepEqual(*head, w) {
		t.Errorf("head differs from the loaded checkpoint:\n%+v\n%+v", *head, w)
	}
}

// TestStreamCheckpointIsLoadCheckpoint: a snapshot alone, item updates in
// the journal (one item several times), items appended through the
// journal, a torn last line, a compaction, and an entry after a version
// gap — streaming reads exactly what LoadCheckpoint loads.
func TestStreamCheckpointIsLoadCheckpoint(t *testing.T) {
	p, s, cp, clock := journalJob(t, 40)
	sameAsLoaded(t, p)

	for i := range 10 {
		it := cp.Items[i%4]
		clock.add(1)
		if err := s.UpdateItem(it, func(cp *jobstore.Checkpoint) {
			it.State, it.Attempts = jobstore.ItemMerged, i+1
			cp.NextAgent = i + 1
		}); err != nil {
			t.Fatal(err)
		}
	}
	sameAsLoaded(t, p)

	if err := s.UpdateItems(func(cp *jobstore.Checkpoint, touch func(*jobstore.CheckpointItem)) {
		touch(cp.Items[7])
		cp.Items[7].State = jobstore.ItemDLQ
		for k := range 3 {
			id := fmt.Sprintf("new-%d", k)
			cp.Items = append(cp.Items, &jobstore.CheckpointItem{ItemOutcome: jobstore.ItemOutcome{ItemID: id, State: jobstore.ItemPending},
				Index: len(cp.Items), Data: json.RawMessage(fmt.Sprintf(`{"id":%q}`, id))})
		}
	}); err != nil {
		t.Fatal(err)
	}
	sameAsLoaded(t, p)
	if _, items := streamed(t, p); len(items) != 43 || items[42].ItemID != "new-2" {
		t.Fatalf("appended items not streamed: %d items", len(items))
	}

	// A torn last line (a crash during an append) is ignored by both.
	f, err := os.OpenFile(p.CheckpointJournal(), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(`{"v":99999,"pos":3,"item":{"item_id":"item-3","sta`); err != nil {
		t.Fatal(err)
	}
	f.Close()
	sameAsLoaded(t, p)

	// A compaction: everything in the snapshot, the journal empty.
	if err := s.Update(func(*jobstore.Checkpoint) {}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	sameAsLoaded(t, p)
}
