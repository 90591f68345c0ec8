package jobstore

// Opening a job's state without reading its items into memory: a resume
// or redrive of a large job finds each item's row where it is on disk.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// OpenState opens a job's checkpoint as a State that holds its items out
// of memory (EvictRows): the returned checkpoint has every job-level
// field, journal entries applied, and no Items (nil: the State has them,
// Len, Scan, Hold); the State reads each item from checkpoint.json or
// checkpoint.journal when it is needed. Nothing is written until the State's first write,
// which is a snapshot. A reader that races a compaction reads both files
// again; a checkpoint of an older version (no counts) is loaded whole
// (LoadCheckpoint) and then evicted. Close the State when done.
func OpenState(p Paths, now func() time.Time) (*State, *Checkpoint, error) {
	for try := 0; ; try++ {
		s, err := openState(p, now, try < 5)
		if errors.Is(err, errJournalGap) {
			continue
		}
		if errors.Is(err, errNoCounts) {
			cp, err := LoadCheckpoint(p)
			if err != nil {
				return nil, nil, err
			}
			s := NewState(p, cp, now)
			return s, cp, nil
		}
		if err != nil {
			return nil, nil, err
		}
		return s, s.cp, nil
	}
}

func openState(p Paths, now func() time.Time, strict bool) (_ *State, err error) {
	f, err := os.Open(p.Checkpoint())
	if err != nil {
		return nil, fmt.Errorf("job %s: read checkpoint: %w", p.JobID, err)
	}
	s := &State{paths: p, now: now, dirty: map[int]struct{}{}, evict: true, tab: &itemTable{}, locs: newLocTable(filepath.Dir(p.Checkpoint()))}
	s.rows.snap = f
	defer func() {
		if err != nil {
			s.rows.close()
		}
	}()
	dec := json.NewDecoder(bufio.NewReaderSize(f, 256<<10))
	cp, atItems, err := decodeHead(dec, p.Checkpoint())
	if err != nil {
		return nil, fmt.Errorf("job %s: read checkpoint: %w", p.JobID, err)
	}
	if cp.FormatVersion < minFormat || cp.FormatVersion > CheckpointFormat {
		return nil, fmt.Errorf("job %s: checkpoint format %d is not supported (this version reads %d to %d)", p.JobID, cp.FormatVersion, minFormat, CheckpointFormat)
	}
	if !atItems {
		return nil, errNoCounts
	}
	s.cp = cp
	bad := func(err error) error { return fmt.Errorf("job %s: read checkpoint items: %w", p.JobID, err) }
	if ok, err := s.lineItems(dec.InputOffset()); err != nil || ok {
		if err != nil {
			return nil, bad(err)
		}
		if s.cp.ItemCounts == nil {
			return nil, errNoCounts
		}
		s.counts = *s.cp.ItemCounts
		if err := s.openJournal(strict); err != nil {
			return nil, err
		}
		return s, nil
	}
	t, err := dec.Token()
	switch {
	case err != nil:
		return nil, bad(err)
	case t == json.Delim('['):
		for dec.More() {
			var raw json.RawMessage
			if err := dec.Decode(&raw); err != nil {
				return nil, bad(err)
			}
			end := dec.InputOffset()
			s.pushItem(nil)
			if err := s.locs.push(rowLoc{off: end - int64(len(raw)), n: uint32(len(raw)), src: rowSnapshot}); err != nil {
				return nil, bad(err)
			}
		}
		if _, err := dec.Token(); err != nil {
			return nil, bad(err)
		}
	case t != nil: // "items": null is no items
		return nil, bad(errors.New("items is not an array"))
	}
	if err := s.readTrailingFields(dec); err != nil {
		return nil, bad(err)
	}
	if s.cp.ItemCounts == nil {
		return nil, errNoCounts
	}
	s.counts = *s.cp.ItemCounts
	if err := s.openJournal(strict); err != nil {
		return nil, err
	}
	return s, nil
}

// lineItems finds the items of a snapshot as the engine writes it —
// "items" last, "[" then one item per line, each a JSON object, lines
// ending "," but the last, then "]}" — reading it from at (just after
// the "items" key) line by line, without decoding the items; each line
// is checked to be one JSON value. It reports false, having changed
// nothing, for a snapshot written otherwise (the decoder reads those).
func (s *State) lineItems(at int64) (bool, error) {
	r := bufio.NewReaderSize(io.NewSectionReader(s.rows.snap, at, 1<<62), 256<<10)
	start, err := r.ReadBytes('\n')
	if err != nil || string(bytes.TrimSpace(start)) != ":[" {
		return false, nil
	}
	off := at + int64(len(start))
	ok := false
	defer func() {
		if !ok {
			s.locs.resize(0)
			s.tab.resize(0)
		}
	}()
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			return false, nil // no end: not written by the engine (or torn)
		}
		body := line[:len(line)-1]
		if string(body) == "]}" {
			if _, err := r.ReadByte(); err != io.EOF {
				return false, nil
			}
			break
		}
		body = bytes.TrimSuffix(body, []byte(","))
		if len(body) < 2 || body[0] != '{' || body[len(body)-1] != '}' || !json.Valid(body) {
			return false, nil
		}
		if err := s.locs.push(rowLoc{off: off, n: uint32(len(body)), src: rowSnapshot}); err != nil {
			return false, err
		}
		s.pushItem(nil)
		off += int64(len(line))
	}
	ok = true
	return true, nil
}

// readTrailingFields applies the fields that follow "items" (the engine
// writes items last; a checkpoint written otherwise, by hand or by a
// tool, may not).
func (s *State) readTrailingFields(dec *json.Decoder) error {
	fields := map[string]json.RawMessage{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return err
		}
		key, _ := t.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return err
		}
		fields[key] = v
	}
	if len(fields) == 0 {
		return nil
	}
	b, err := json.Marshal(fields)
	if err != nil {
		return err
	}
	items := s.cp.Items
	err = json.Unmarshal(b, &s.cp.CheckpointHead)
	s.cp.Items = items
	return err
}

// openJournal finds the rows of the journal's entries newer than the
// snapshot (contiguous versions, stopping at a torn or foreign line as
// replayJournal does) and applies their job-level fields.
func (s *State) openJournal(strict bool) error {
	j, err := os.Open(s.paths.CheckpointJournal())
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("job %s: read checkpoint journal: %w", s.paths.JobID, err)
	}
	s.rows.journal = j
	err = walkJournal(j, s.cp.CheckpointVersion, strict, func(e *journalEntry, line []byte, at int64) error {
		if e.Counts == nil {
			return errNoCounts
		}
		if e.Pos == s.itemCount() {
			s.pushItem(nil)
			s.growLocs()
		}
		if e.Pos < 0 || e.Pos >= s.itemCount() {
			return nil
		}
		s.cp.CheckpointVersion = e.V
		s.cp.UpdatedAt = e.UpdatedAt
		s.cp.NextAgent = max(s.cp.NextAgent, e.NextAgent)
		s.counts = *e.Counts
		loc, err := s.locs.get(e.Pos)
		if err != nil {
			return err
		}
		if e.Item.DataLen == 0 && loc.src != rowNone {
			// The entry keeps the data of the row before it (replayJournal):
			// it stays in memory with it until the next snapshot.
			old, err := s.materialize(e.Pos)
			if err != nil {
				return err
			}
			e.Item.Data, e.Item.DataOff, e.Item.DataLen = old.Data, old.DataOff, old.DataLen
			e.Item.pos = e.Pos
			s.setItem(e.Pos, e.Item)
			s.dirty[e.Pos] = struct{}{}
			return s.locs.set(e.Pos, rowLoc{})
		}
		if o, n, ok := journalItem(line[:len(line)-1]); ok {
			s.setItem(e.Pos, nil)
			return s.locs.set(e.Pos, rowLoc{off: at + int64(o), n: uint32(n), src: rowJournal})
		}
		e.Item.pos = e.Pos
		s.setItem(e.Pos, e.Item)
		s.dirty[e.Pos] = struct{}{}
		return s.locs.set(e.Pos, rowLoc{})
	})
	if err != nil && !errors.Is(err, errJournalGap) && !errors.Is(err, errNoCounts) {
		return fmt.Errorf("job %s: read checkpoint journal: %w", s.paths.JobID, err)
	}
	return err
}

// Rewrite calls fn with every item, in position order, each read back
// into memory if it was out of it; an item fn changes (it returns true)
// stays in memory and is written by the state's next write, not by
// Rewrite; the others leave memory again. maybe (nil: every row), given
// the JSON row of an item out of memory, says whether fn may change it:
// a row it refuses is not decoded (RowHas helps write it). Recoveries that
// must look at every item of a large job use it.
func (s *State) Rewrite(maybe func(row []byte) bool, fn func(it *CheckpointItem) bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	changed := false
	for i := range s.itemCount() {
		it := s.itemAt(i)
		if it == nil {
			var err error
			if it, err = s.rowItem(i, maybe); err != nil {
				return err
			}
			if it == nil {
				continue // refused undecoded
			}
		}
		before := *it
		if !fn(it) {
			continue
		}
		s.counts.add(&before, -1)
		s.counts.add(it, 1)
		it.pos = i
		s.setItem(i, it)
		s.dirty[i] = struct{}{}
		changed = true
	}
	if changed {
		s.version++
		s.full = s.version
	}
	return nil
}

// RowHas reports whether an item's JSON row (as Rewrite gives it) has
// the field key at all (fields left out when empty: "spend_ceiling_usd",
// "pending_dlq_record", …), or, with values, has it with one of them
// (string values, as "state" holds them). A row written by json.Marshal
// or the snapshot encoder has each key once, unescaped, outside strings,
// so a false answer is certain; a true one may not be (a nested raw
// value), and the caller decodes the row to know.
func RowHas(row []byte, key string, values ...string) bool {
	k := `"` + key + `":`
	if len(values) == 0 {
		return bytes.Contains(row, []byte(k))
	}
	for _, v := range values {
		if bytes.Contains(row, []byte(k+`"`+v+`"`)) {
			return true
		}
	}
	return false
}
