package runner

import (
	"encoding/binary"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/prodigy-action/prodigy-action/jobstore"
)

// indexedJob is a job of n items, rows out of memory, and its item index.
func indexedJob(t *testing.T, n int) (*jobstore.State, *itemIndex) {
	t.Helper()
	p := jobstore.Paths{Home: t.TempDir(), Repo: "r", JobID: "j"}
	cp := &jobstore.Checkpoint{CheckpointHead: jobstore.CheckpointHead{FormatVersion: jobstore.CheckpointFormat, JobID: "j", Status: jobstore.StatusRunning,
		Phase: jobstore.PhaseMap, SetupCompleted: true, Vars: map[string]string{}}}
	for i := range n {
		cp.Items = append(cp.Items, &jobstore.CheckpointItem{ItemOutcome: jobstore.ItemOutcome{ItemID: fmt.Sprintf("item-%d", i), State: jobstore.ItemDLQ}, Index: i})
	}
	s := jobstore.NewState(p, cp, time.Now)
	if err := s.Update(func(*jobstore.Checkpoint) {}); err != nil {
		t.Fatal(err)
	}
	s.EvictRows()
	t.Cleanup(func() { _ = s.Close() })
	x, err := newItemIndex(s, filepath.Dir(p.Checkpoint()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(x.close)
	return s, x
}

// merge runs mergeItems for page through UpdateItemsAt, as a redrive
// does, and returns the positions it made pending.
func merge(t *testing.T, s *jobstore.State, x *itemIndex, page []*jobstore.CheckpointItem) []int {
	t.Helper()
	ids := make([]string, len(page))
	for k, e := range page {
		ids[k] = e.ItemID
	}
	at, err := x.lookup(ids)
	if err != nil {
		t.Fatal(err)
	}
	var added []int
	err = s.UpdateItemsAt(at, func(items jobstore.ItemsAt, touch func(*jobstore.CheckpointItem)) {
		added = mergeItems(items, page, x, touch)
	})
	if err != nil {
		t.Fatal(err)
	}
	return added
}

func redrive(ids ...string) []*jobstore.CheckpointItem {
	var page []*jobstore.CheckpointItem
	for _, id := range ids {
		page = append(page, &jobstore.CheckpointItem{ItemOutcome: jobstore.ItemOutcome{ItemID: id, State: jobstore.ItemPending}})
	}
	return page
}

// TestItemIndexFindsItemsWithoutHoldingThem: a redrive page's ids are
// found at their positions, new ids are appended once (a later page
// finds them), and the index keeps in memory only the page's candidates.
func TestItemIndexFindsItemsWithoutHoldingThem(t *testing.T) {
	s, x := indexedJob(t, 5000)
	got := merge(t, s, x, redrive("item-17", "item-4999", "new-a", "item-0", "new-a"))
	if fmt.Sprint(got) != "[17 4999 5000 0 5000]" {
		t.Fatalf("merged at %v", got)
	}
	got = merge(t, s, x, redrive("new-a", "new-b", "item-2500"))
	if fmt.Sprint(got) != "[5000 5001 2500]" {
		t.Fatalf("second page merged at %v", got)
	}
	if s.Len() != 5002 || x.n != 5002 || len(x.page) != 3 {
		t.Fatalf("Len %d, indexed %d, page %d", s.Len(), x.n, len(x.page))
	}
}

// TestItemIndexSharedFingerprintsNeverMatchWrongly makes every item's
// fingerprint the one of the id looked up: every position is a candidate,
// and the item is still found where it is, and only there.
func TestItemIndexSharedFingerprintsNeverMatchWrongly(t *testing.T) {
	s, x := indexedJob(t, 300)
	var b [4]byte
	binary.LittleEndian.PutUint32(b[:], x.fingerprint("item-123"))
	for pos := range x.n {
		if _, err := x.f.WriteAt(b[:], int64(pos)*4); err != nil {
			t.Fatal(err)
		}
	}
	at, err := x.lookup([]string{"item-123"})
	if err != nil || len(at) != 300 {
		t.Fatalf("lookup gave %d candidates, %v", len(at), err)
	}
	if got := merge(t, s, x, redrive("item-123")); fmt.Sprint(got) != "[123]" || s.Len() != 300 {
		t.Fatalf("merged at %v (%d items)", got, s.Len())
	}
}
