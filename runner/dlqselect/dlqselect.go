// Package dlqselect is a redrive's selection: the DLQ records of a job
// that it runs again, as pending checkpoint rows — the reprocess-eligible
// ones (all with Force) that match a --filter — streamed from the job's
// DLQ store one record at a time (Each) or in pages (Pages, Pager), so
// that a redrive of any size holds one page.
package dlqselect

import (
	"fmt"
	"iter"
	"sort"
	"strings"

	"github.com/prodigy-action/prodigy-action/dlq"
	"github.com/prodigy-action/prodigy-action/items"
	"github.com/prodigy-action/prodigy-action/jobstore"
)

// Selection is which of a job's DLQ records a redrive runs again.
type Selection struct {
	Paths jobstore.Paths // the job
	// Filter keeps the records it matches (item.* is dlq.FilterEnv); nil
	// keeps all.
	Filter *items.Filter
	// Force selects records that are not reprocess_eligible too.
	Force bool
	// IDField is the workflow's map.id_field, which labels the items.
	IDField string
	// Warn hears what the store could not read; nil drops it.
	Warn func(string)
	// Usage wraps a --filter the records cannot take (the caller's usage
	// error); nil returns it as it is.
	Usage func(error) error
}

func (s Selection) warn(m string) {
	if s.Warn != nil {
		s.Warn(m)
	}
}

func (s Selection) usage(err error) error {
	if s.Usage != nil {
		return s.Usage(err)
	}
	return err
}

// Pager pages a selection into a job (Selection.Pager).
type Pager struct {
	Size  int
	First []*jobstore.CheckpointItem // the first page (empty: nothing selected)
	More  bool                       // a second page exists
	// Next returns the pages from the first on, nil at the end.
	Next func() ([]*jobstore.CheckpointItem, error)
	// Stop ends the stream; call it when done.
	Stop func()
}

// Pager starts streaming the selection (Pages) in pages of size
// (DefaultBatch when 0) and reads the first page, and the second when the
// first is full, so the caller knows whether there is anything to do and
// whether it is one page.
func (s Selection) Pager(only map[string]bool, size int) (*Pager, error) {
	if size <= 0 {
		size = DefaultBatch
	}
	next, stop := iter.Pull2(s.Pages(only, size))
	pull := func() ([]*jobstore.CheckpointItem, error) {
		page, err, ok := next()
		if !ok {
			return nil, nil
		}
		return page, err
	}
	first, err := pull()
	if err != nil {
		stop()
		return nil, err
	}
	var ahead []*jobstore.CheckpointItem
	if len(first) == size {
		if ahead, err = pull(); err != nil {
			stop()
			return nil, err
		}
	}
	queue := [][]*jobstore.CheckpointItem{first, ahead}
	p := &Pager{Size: size, First: first, More: len(ahead) > 0, Stop: stop}
	p.Next = func() ([]*jobstore.CheckpointItem, error) {
		for len(queue) > 0 {
			page := queue[0]
			queue = queue[1:]
			if len(page) > 0 {
				return page, nil
			}
		}
		if len(ahead) == 0 {
			return nil, nil // the first page was the last
		}
		return pull()
	}
	return p, nil
}

// DefaultBatch is how many DLQ records a redrive pages into its job at a
// time (runner.RedriveSpec.BatchSize).
const DefaultBatch = 1000

// Pages streams the selection (Each, restricted to only when set) in
// pages of at most size items. Only the current page's records are held;
// stopping the iteration stops the stream.
func (s Selection) Pages(only map[string]bool, size int) iter.Seq2[[]*jobstore.CheckpointItem, error] {
	return func(yield func([]*jobstore.CheckpointItem, error) bool) {
		var page []*jobstore.CheckpointItem
		stopped := false
		_, err := s.Each(nil, func(it *jobstore.CheckpointItem) error {
			if only != nil && !only[it.ItemID] {
				return nil
			}
			page = append(page, it)
			if len(page) < size {
				return nil
			}
			p := page
			page = nil
			if !yield(p, nil) {
				stopped = true
				return dlq.ErrStop
			}
			return nil
		})
		switch {
		case stopped:
		case err != nil:
			yield(nil, err)
		case len(page) > 0:
			yield(page, nil)
		}
	}
}

// Each streams the job's DLQ and calls fn with each record to re-run, as a
// pending item, in store order: reprocess-eligible records (all with
// Force) that match the filter, leaving out the items in skip; item
// attempts continue from the record's failure_count, which also starts the
// redrive's attempt budget. An error of fn stops the stream and is
// returned. It returns how many records it read (all, selected or not).
// Nothing but the current record is held.
func (s Selection) Each(skip map[string]bool, fn func(*jobstore.CheckpointItem) error) (int, error) {
	store, err := dlq.Open(s.Paths.DLQRoot(), s.Paths.JobID, dlq.Options{Warn: func(m string) { s.warn("DLQ: " + m) }})
	if err != nil {
		return 0, err
	}
	defer store.Close() // read only: nothing to flush
	if s.Filter != nil {
		fields := map[string]bool{}
		err := store.Each(func(r dlq.DeadLetteredItem) error {
			for k := range dlq.FilterEnv(r) {
				fields[k] = true
			}
			return nil
		})
		if err != nil {
			return 0, err
		}
		if err := s.checkNames(fields); err != nil {
			return 0, err
		}
	}
	seen := 0
	err = store.Each(func(r dlq.DeadLetteredItem) error {
		seen++
		if (!s.Force && !r.ReprocessEligible) || skip[r.ItemID] {
			return nil
		}
		if s.Filter != nil {
			ok, err := s.Filter.Match(map[string]any{"item": dlq.FilterEnv(r)})
			if err != nil {
				return s.usage(fmt.Errorf("--filter on %s: %w", r.ItemID, err))
			}
			if !ok {
				return nil
			}
		}
		return fn(&jobstore.CheckpointItem{ItemOutcome: jobstore.ItemOutcome{ItemID: r.ItemID, Label: items.ItemLabel(r.ItemID, r.ItemData, s.IDField), State: jobstore.ItemPending, Attempts: int(r.FailureCount)}, BudgetBase: int(r.FailureCount), Data: r.ItemData})
	})
	return seen, err
}

// checkNames rejects a `dlq retry --filter` that reads a name no selected
// record has: item.* must be a record field or an item_data field of some
// record. The error lists the known names.
func (s Selection) checkNames(fields map[string]bool) error {
	f := s.Filter
	known := map[string]bool{}
	for k := range fields {
		known["item."+k] = true
	}
	for _, k := range dlq.FilterFields {
		known["item."+k] = true
	}
	var unknown []string
	for _, n := range f.Names() {
		if n == "item" || known[n] {
			continue
		}
		unknown = append(unknown, n)
	}
	if len(unknown) == 0 {
		return nil
	}
	names := make([]string, 0, len(known))
	for k := range known {
		names = append(names, k)
	}
	sort.Strings(names)
	return s.usage(fmt.Errorf("--filter %q: unknown identifier(s) %s; known: %s", f.String(), strings.Join(unknown, ", "), strings.Join(names, ", ")))
}
