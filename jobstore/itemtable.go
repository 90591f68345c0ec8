package jobstore

// The items of a State that evicts rows, by position, in memory that does
// not grow with the job: only the items in memory take room.

import "fmt"

// itemChunkLen is how many positions one chunk of an itemTable covers.
const itemChunkLen = 1024

// itemTable holds a State's items by position once it evicts rows
// (EvictRows): an item out of memory is nil, and a chunk of itemChunkLen
// positions exists only while one of its items is in memory, so the
// table costs 8 bytes per itemChunkLen positions beyond the items it
// holds. The zero value is an empty table.
type itemTable struct {
	n      int
	chunks []*itemChunk
	live   int        // items in memory
	spare  *itemChunk // the last chunk emptied, made again without an allocation
}

type itemChunk struct {
	items [itemChunkLen]*CheckpointItem
	live  int
}

// len is the number of positions.
func (t *itemTable) len() int { return t.n }

// get is the item at i (0 ≤ i < len), nil when it is out of memory.
func (t *itemTable) get(i int) *CheckpointItem {
	c := t.chunks[i/itemChunkLen]
	if c == nil {
		return nil
	}
	return c.items[i%itemChunkLen]
}

// set puts it (nil: out of memory) at i (0 ≤ i < len).
func (t *itemTable) set(i int, it *CheckpointItem) {
	k := i / itemChunkLen
	c := t.chunks[k]
	if c == nil {
		if it == nil {
			return
		}
		c, t.spare = t.spare, nil
		if c == nil {
			c = &itemChunk{}
		}
		t.chunks[k] = c
	}
	old := c.items[i%itemChunkLen]
	switch {
	case old == nil && it != nil:
		c.live++
		t.live++
	case old != nil && it == nil:
		c.live--
		t.live--
	}
	c.items[i%itemChunkLen] = it
	if c.live == 0 {
		t.chunks[k], t.spare = nil, c // every entry is nil
	}
}

// resize makes the table n positions long: positions added are out of
// memory, items beyond n are dropped.
func (t *itemTable) resize(n int) {
	for k := (n + itemChunkLen - 1) / itemChunkLen; k < len(t.chunks); k++ {
		if c := t.chunks[k]; c != nil {
			t.live -= c.live
			t.chunks[k] = nil
		}
	}
	if k := n / itemChunkLen; n%itemChunkLen != 0 && k < len(t.chunks) && t.chunks[k] != nil {
		for i := n; i < min(t.n, (k+1)*itemChunkLen); i++ {
			t.set(i, nil)
		}
	}
	chunks := (n + itemChunkLen - 1) / itemChunkLen
	for len(t.chunks) < chunks {
		t.chunks = append(t.chunks, nil)
	}
	clear(t.chunks[chunks:])
	t.chunks = t.chunks[:chunks]
	t.n = n
}

// push appends it at position len.
func (t *itemTable) push(it *CheckpointItem) {
	t.resize(t.n + 1)
	t.set(t.n-1, it)
}

// each calls fn with every item in memory and its position, in position
// order; fn may set positions (their chunk is read before fn runs).
func (t *itemTable) each(fn func(i int, it *CheckpointItem)) {
	for k := 0; k < len(t.chunks); k++ {
		c := t.chunks[k]
		if c == nil {
			continue
		}
		for j, it := range c.items {
			if it != nil {
				fn(k*itemChunkLen+j, it)
			}
		}
	}
}

// The State's items, through cp.Items while it holds every item in memory
// and through its itemTable once it evicts rows.

// itemAt is the item at position i (0 ≤ i < itemCount), nil when it is
// out of memory.
func (s *State) itemAt(i int) *CheckpointItem {
	if s.tab != nil {
		return s.tab.get(i)
	}
	return s.cp.Items[i]
}

// setItem puts it (nil: out of memory) at position i.
func (s *State) setItem(i int, it *CheckpointItem) {
	if s.tab != nil {
		s.tab.set(i, it)
		return
	}
	s.cp.Items[i] = it
}

// itemCount is the number of the job's items.
func (s *State) itemCount() int {
	if s.tab != nil {
		return s.tab.len()
	}
	return len(s.cp.Items)
}

// pushItem appends it (nil: out of memory) to the items.
func (s *State) pushItem(it *CheckpointItem) {
	if s.tab != nil {
		s.tab.push(it)
		return
	}
	s.cp.Items = append(s.cp.Items, it)
}

// eachInMemory calls fn with every item in memory and its position, in
// position order; fn may drop it (setItem(i, nil)).
func (s *State) eachInMemory(fn func(i int, it *CheckpointItem)) {
	if s.tab != nil {
		s.tab.each(fn)
		return
	}
	for i, it := range s.cp.Items {
		if it != nil {
			fn(i, it)
		}
	}
}

// toTable moves the items of cp.Items into the state's itemTable (from
// here on cp.Items is nil outside the calls that hand fn every item).
func (s *State) toTable() {
	if s.tab == nil {
		s.tab = &itemTable{}
	}
	// An item put in another's place (not one the table held there) has
	// no durable row yet.
	n := len(s.cp.Items)
	s.locs.resize(n)
	for i, it := range s.cp.Items {
		if i < s.tab.len() && s.tab.get(i) != it && it != nil {
			s.setLoc(i, rowLoc{})
		}
	}
	s.tab.resize(0)
	s.tab.resize(n)
	for i, it := range s.cp.Items {
		s.tab.set(i, it)
	}
	s.cp.Items = nil
}

// fromTable moves the items of the state's itemTable back into cp.Items,
// every one read back into memory: the state holds its items there from
// here on (it no longer evicts them).
func (s *State) fromTable() error {
	if err := s.unpack(); err != nil {
		return err
	}
	s.tab = nil
	return nil
}

// allItems reads every item out of memory back into it and returns all
// of them in a new slice, in position order. A row that cannot be read
// (an I/O failure of the job's own fsynced files) is an error; the items
// read stay in memory.
func (s *State) allItems() ([]*CheckpointItem, error) {
	items := make([]*CheckpointItem, s.itemCount())
	for i := range items {
		it, err := s.materialize(i)
		if err != nil {
			return nil, fmt.Errorf("job %s: %w", s.paths.JobID, err)
		}
		items[i] = it
	}
	return items, nil
}
