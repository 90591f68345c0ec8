package dlqselect

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prodigy-action/prodigy-action/dlq"
	"github.com/prodigy-action/prodigy-action/items"
	"github.com/prodigy-action/prodigy-action/jobstore"
)

// jobDLQ makes a job whose DLQ holds n records, item-0 … item-(n-1): the
// odd ones not reprocess-eligible, each with a failure_count of 2 and data
// {"n":i,"name":"file-i"}.
func jobDLQ(t *testing.T, n int) jobstore.Paths {
	t.Helper()
	p := jobstore.Paths{Home: t.TempDir(), Repo: "repo", JobID: "job-1"}
	s, err := dlq.Open(p.DLQRoot(), p.JobID, dlq.Options{Capacity: -1})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range n {
		r := dlq.FromAgentResult(dlq.AgentResult{ItemID: fmt.Sprintf("item-%d", i), Status: dlq.StatusFailed,
			ItemData: json.RawMessage(fmt.Sprintf(`{"n":%d,"name":"file-%d"}`, i, i)),
			Failures: []dlq.Failure{{At: at, Message: "exit 1"}, {At: at, Message: "exit 1"}}})
		r.ReprocessEligible = i%2 == 0
		if _, err := s.Add(*r); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return p
}

func ids(rows []*jobstore.CheckpointItem) string {
	var s []string
	for _, r := range rows {
		s = append(s, r.ItemID)
	}
	return strings.Join(s, ",")
}

// Each gives the eligible records (all with Force) as pending rows whose
// attempts and budget continue from failure_count, with their data,
// labelled as the engine labels items, leaving out skip.
func TestEachSelectsEligibleRecordsAsPendingRows(t *testing.T) {
	p := jobDLQ(t, 5)
	var got []*jobstore.CheckpointItem
	seen, err := Selection{Paths: p}.Each(map[string]bool{"item-2": true}, func(it *jobstore.CheckpointItem) error {
		got = append(got, it)
		return nil
	})
	if err != nil || seen != 5 || ids(got) != "item-0,item-4" {
		t.Fatalf("Each = %s (read %d), %v; want item-0,item-4 of 5", ids(got), seen, err)
	}
	it := got[0]
	var data map[string]any
	if err := json.Unmarshal(it.Data, &data); err != nil || data["name"] != "file-0" {
		t.Fatalf("row data %s: %v", it.Data, err)
	}
	if it.State != jobstore.ItemPending || it.Attempts != 2 || it.BudgetBase != 2 || it.Label != items.ItemLabel("item-0", it.Data, "") || it.Label == "item-0" {
		t.Fatalf("row = %+v", it)
	}
	got = nil
	if _, err := (Selection{Paths: p, Force: true}).Each(nil, func(it *jobstore.CheckpointItem) error { got = append(got, it); return nil }); err != nil || len(got) != 5 {
		t.Fatalf("Force: %s, %v", ids(got), err)
	}
}

// A filter selects on the records' fields and item data; a name no record
// has is the caller's usage error, listing the names it knows.
func TestEachFilters(t *testing.T) {
	p := jobDLQ(t, 6)
	f, err := items.CompileFilter("item.n >= 2 && item.failure_count == 2")
	if err != nil {
		t.Fatal(err)
	}
	var got []*jobstore.CheckpointItem
	if _, err := (Selection{Paths: p, Filter: f}).Each(nil, func(it *jobstore.CheckpointItem) error { got = append(got, it); return nil }); err != nil || ids(got) != "item-2,item-4" {
		t.Fatalf("filtered = %s, %v", ids(got), err)
	}
	bad, err := items.CompileFilter("item.nmae == 'x'")
	if err != nil {
		t.Fatal(err)
	}
	errUsage := errors.New("usage")
	_, err = Selection{Paths: p, Filter: bad, Usage: func(e error) error { return fmt.Errorf("%w: %w", errUsage, e) }}.Each(nil, func(*jobstore.CheckpointItem) error {
		t.Fatal("a record was selected by a filter naming an unknown field")
		return nil
	})
	if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), "unknown identifier(s) item.nmae") || !strings.Contains(err.Error(), "item.name") {
		t.Fatalf("unknown name: %v", err)
	}
}

// Pager reads the first page and, when it is full, the next, so the
// caller knows whether there is anything to do and whether it is one page;
// Next returns every page once, then nil.
func TestPagerReadsOnePageAhead(t *testing.T) {
	p := jobDLQ(t, 10) // 5 eligible
	for _, c := range []struct {
		size  int
		more  bool
		pages string
	}{
		{size: 2, more: true, pages: "item-0,item-2|item-4,item-6|item-8"},
		{size: 5, more: false, pages: "item-0,item-2,item-4,item-6,item-8"},
		{size: 10, more: false, pages: "item-0,item-2,item-4,item-6,item-8"},
	} {
		pg, err := Selection{Paths: p}.Pager(nil, c.size)
		if err != nil {
			t.Fatal(err)
		}
		var pages []string
		for {
			page, err := pg.Next()
			if err != nil {
				t.Fatal(err)
			}
			if page == nil {
				break
			}
			pages = append(pages, ids(page))
		}
		pg.Stop()
		if pg.More != c.more || len(pg.First) != min(c.size, 5) || strings.Join(pages, "|") != c.pages {
			t.Errorf("size %d: more %v, first %d, pages %s; want more %v, pages %s", c.size, pg.More, len(pg.First), pages, c.more, c.pages)
		}
	}
	pg, err := Selection{Paths: p}.Pager(map[string]bool{"item-4": true}, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Stop()
	if pg.Size != DefaultBatch || ids(pg.First) != "item-4" || pg.More {
		t.Fatalf("only item-4: size %d, first %s, more %v", pg.Size, ids(pg.First), pg.More)
	}
}
