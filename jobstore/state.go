package jobstore

// The writer of a job's checkpoint: State keeps it in memory and makes
// every change durable (journal appends, snapshots, the session file).

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/prodigy-action/prodigy-action/internal/fsx"
)

// State guards a job's checkpoint in memory and makes changes durable
// with group commit: callers change the state under the lock, then wait
// until a write that includes their change is on disk; concurrent callers
// share one write. Safe for concurrent use.
//
// The cost of an item's change does not grow with the job: UpdateItem
// appends the changed items (without their data) to checkpoint.journal,
// one JSON line each with the job's item counts, and fsyncs once per
// group. Update (job-level changes: phases, item lists, the final status)
// and compaction rewrite checkpoint.json whole and empty the journal;
// compaction happens when the journal outgrows the snapshot (at least
// 1 MiB), so its cost is amortised to O(1) per change. Item data never
// enters the journal or the snapshot: it is written once to items.jsonl
// (SpoolItem, or the next snapshot) and read back on demand (ItemData).
// The session file is rewritten by every Update and at most once per
// SessionInterval by UpdateItem.
type State struct {
	paths Paths
	now   func() time.Time
	// redact runs over the checkpoint, session and item JSON before writing.
	redact func([]byte) []byte

	mu      sync.Mutex
	cp      *Checkpoint
	counts  Counts           // cp.Counts(), kept current
	version uint64           // bumped by every change
	full    uint64           // last version that needs a snapshot
	dirty   map[int]struct{} // items changed since the last write
	spool   *spool           // items.jsonl, opened on first use

	// Items out of memory (rows.go): once evict is set the items are in
	// tab (cp.Items is nil outside Read, Update and UpdateItems), nil for
	// an item dropped from memory, whose row is at locs' entry.
	evict   bool
	tab     *itemTable
	locs    *locTable
	held    map[int]int      // Hold counts by position
	writing map[int]struct{} // positions of the journal append under way
	pinAll  bool             // a snapshot is being written: evict nothing
	rows    rowFiles

	flushMu      sync.Mutex
	flushed      uint64
	journalSize  int64
	snapshotSize int64
	sessionAt    time.Time
	wroteOnce    bool
}

// SessionInterval is the minimum time between two session file writes
// caused by item changes alone.
const SessionInterval = time.Second

// minCompact is the journal size below which it is never compacted.
const minCompact = 1 << 20

// NewState wraps cp; now stamps updated_at. Nothing is written until the
// first Update (which writes the snapshot).
func NewState(p Paths, cp *Checkpoint, now func() time.Time) *State {
	s := &State{paths: p, now: now, cp: cp, dirty: map[int]struct{}{}, locs: newLocTable(filepath.Dir(p.Checkpoint()))}
	s.reindex()
	return s
}

// reindex numbers the items and recounts them (O(items): only with a
// snapshot).
func (s *State) reindex() {
	var n Counts
	held := 0
	s.eachInMemory(func(i int, it *CheckpointItem) {
		it.pos = i
		n.add(it, 1)
		held++
	})
	if held == s.itemCount() {
		n.Total = s.itemCount()
		s.counts = n
	}
}

// redactJSON passes one JSON document through the redactor, if any.
func (s *State) redactJSON(b []byte) []byte {
	if s.redact == nil {
		return b
	}
	return s.redact(b)
}

// RedactWith makes every later write pass the checkpoint, session and item
// JSON through fn (the job's redactor) first. Call it before the first
// Update.
func (s *State) RedactWith(fn func([]byte) []byte) { s.redact = fn }

// Update applies fn to the checkpoint and makes the change durable:
// checkpoint.json and the session file are rewritten atomically. Use it
// for job-level changes; UpdateItem for changes of one item.
func (s *State) Update(fn func(cp *Checkpoint)) error {
	s.mu.Lock()
	if err := s.unpack(); err != nil {
		s.mu.Unlock()
		return err
	}
	fn(s.cp)
	s.pack()
	s.version++
	s.full = s.version
	v := s.version
	s.mu.Unlock()
	err := s.flush(v)
	s.mu.Lock()
	s.evictLocked()
	s.mu.Unlock()
	return err
}

// UpdateItem applies fn, which may change it (an item of the checkpoint)
// and cp.NextAgent, and makes the change durable by appending it to the
// journal. Other changes fn makes are only written by the next Update;
// fn must not look at cp.Items (nil once the state evicts rows).
func (s *State) UpdateItem(it *CheckpointItem, fn func(cp *Checkpoint)) error {
	s.mu.Lock()
	i, ok := s.pos(it)
	if !ok && s.evict && it.pos >= 0 && it.pos < s.itemCount() && s.itemAt(it.pos) == nil {
		// A pointer kept past the call that gave it (only Hold's are
		// valid after it), to an item dropped since without a change:
		// its row is what it holds.
		s.setItem(it.pos, it)
		i, ok = it.pos, true
	}
	if ok {
		s.counts.add(it, -1)
	}
	fn(s.cp)
	s.version++
	if ok {
		s.counts.add(it, 1)
		s.dirty[i] = struct{}{}
	} else {
		s.full = s.version
	}
	v := s.version
	s.mu.Unlock()
	return s.flush(v)
}

// UpdateItems applies fn, which may append items to cp.Items and change
// existing ones, calling touch(it) before it changes an existing item it;
// the change is made durable as journal entries (the appended items' data
// goes to items.jsonl first), so its cost is that of the items touched or
// appended, not of the checkpoint. Other changes fn makes are only written
// by the next Update.
func (s *State) UpdateItems(fn func(cp *Checkpoint, touch func(*CheckpointItem))) error {
	err := s.updateItems(s.unpack, func(touch func(*CheckpointItem)) {
		fn(s.cp, touch)
		s.pack()
	})
	s.mu.Lock()
	s.evictLocked()
	s.mu.Unlock()
	return err
}

// ItemsAt is what UpdateItemsAt's fn sees of the job's items: the items
// at the positions it was given, and appends. Valid only during the call.
type ItemsAt struct{ s *State }

// Len is the number of the job's items, those appended included.
func (v ItemsAt) Len() int { return v.s.itemCount() }

// At is the item at pos when it is in memory, which the positions given
// and the items appended are; another position may be nil (out of
// memory), and one out of range is.
func (v ItemsAt) At(pos int) *CheckpointItem {
	if pos < 0 || pos >= v.s.itemCount() {
		return nil
	}
	return v.s.itemAt(pos)
}

// Append adds it at the end (position Len before the call).
func (v ItemsAt) Append(it *CheckpointItem) { v.s.pushItem(it) }

// UpdateItemsAt is UpdateItems for a change of the items at positions
// (and items appended): only those are read back into memory first, so
// its cost does not grow with the job; fn sees them through ItemsAt.
func (s *State) UpdateItemsAt(positions []int, fn func(items ItemsAt, touch func(*CheckpointItem))) error {
	err := s.updateItems(func() error {
		for _, i := range positions {
			if i >= 0 && i < s.itemCount() {
				if _, err := s.materialize(i); err != nil {
					return err
				}
			}
		}
		return nil
	}, func(touch func(*CheckpointItem)) { fn(ItemsAt{s}, touch) })
	s.mu.Lock()
	for _, i := range positions {
		s.evictOne(i)
	}
	s.mu.Unlock()
	return err
}

// updateItems is UpdateItems after read (items read back, under the
// lock; nil: none); fn changes and appends items under the lock.
func (s *State) updateItems(read func() error, fn func(touch func(*CheckpointItem))) error {
	s.mu.Lock()
	if read != nil {
		if err := read(); err != nil {
			s.mu.Unlock()
			return err
		}
	}
	n0 := s.itemCount()
	var touched []*CheckpointItem
	seen := map[*CheckpointItem]bool{}
	fn(func(it *CheckpointItem) {
		if i, ok := s.pos(it); ok && i < n0 && !seen[it] {
			seen[it] = true
			s.counts.add(it, -1)
			touched = append(touched, it)
			s.dirty[i] = struct{}{}
		}
	})
	s.version++
	for _, it := range touched {
		s.counts.add(it, 1)
	}
	for i := n0; i < s.itemCount(); i++ {
		it := s.itemAt(i)
		it.pos = i
		s.counts.add(it, 1)
		s.counts.Total++
		if err := s.spoolLocked(it); err != nil {
			s.full = s.version // the snapshot spools it again
		}
		s.dirty[i] = struct{}{}
	}
	v := s.version
	s.mu.Unlock()
	return s.flush(v)
}

// pos is it's index in the checkpoint, if it is one of its items.
func (s *State) pos(it *CheckpointItem) (int, bool) {
	i := it.pos
	if i >= 0 && i < s.itemCount() && s.itemAt(i) == it {
		return i, true
	}
	return 0, false
}

// Read runs fn with the checkpoint locked, every item in memory (read
// back if it was out of memory, EvictRows); fn must not keep references
// beyond the next change of the state. It fails, without calling fn, when
// an item cannot be read back.
func (s *State) Read(fn func(cp *Checkpoint)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.unpack(); err != nil {
		return err
	}
	fn(s.cp)
	s.pack()
	return nil
}

// ReadHead runs fn with the checkpoint's head locked (no item is read
// back); fn must not keep references. Use it to read job-level fields, or
// items held (Hold) under the lock.
func (s *State) ReadHead(fn func(h *CheckpointHead)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fn(&s.cp.CheckpointHead)
}

// UpdateHead applies fn to the checkpoint's head and makes the change
// durable as Update does, without reading any item back.
func (s *State) UpdateHead(fn func(h *CheckpointHead)) error {
	s.mu.Lock()
	fn(&s.cp.CheckpointHead)
	s.version++
	s.full = s.version
	v := s.version
	s.mu.Unlock()
	return s.flush(v)
}

// JobCostUSD is the job's spend as Checkpoint.JobCost says it (its items'
// plus setup's and reduce's), from the counts: no item is read.
func (s *State) JobCostUSD() float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return RoundUSD(s.counts.ItemsCostUSD + s.cp.PhaseCostUSD)
}

// Counts tallies the items by state in O(1): the counts are kept current
// by UpdateItem and recounted by Update.
func (s *State) Counts() Counts {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counts
}

// SpoolItem writes it.Data (redacted) to the job's items.jsonl and
// replaces it with a reference (DataOff, DataLen), so a job's item data is
// not held in memory. Use it for items not yet in the checkpoint (while
// loading them); an Update then adds them. The data is made durable before
// the next snapshot is written. An item without Data is left alone.
func (s *State) SpoolItem(it *CheckpointItem) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.spoolLocked(it)
}

func (s *State) spoolLocked(it *CheckpointItem) error {
	if it.Data == nil {
		return nil
	}
	if s.spool == nil {
		sp, err := openSpool(s.paths.ItemData())
		if err != nil {
			return err
		}
		s.spool = sp
	}
	off, n, err := s.spool.add(s.redactJSON(it.Data))
	if err != nil {
		return fmt.Errorf("write item data: %w", err)
	}
	it.Data, it.DataOff, it.DataLen = nil, off, n
	return nil
}

// ItemData returns the JSON value of it, an item of the checkpoint: its
// Data, or its line of items.jsonl. As stored, the data is redacted.
func (s *State) ItemData(it *CheckpointItem) (json.RawMessage, error) {
	s.mu.Lock()
	data, off, n := it.Data, it.DataOff, it.DataLen
	if data != nil || n == 0 {
		s.mu.Unlock()
		return data, nil
	}
	if s.spool == nil {
		sp, err := openSpool(s.paths.ItemData())
		if err != nil {
			s.mu.Unlock()
			return nil, err
		}
		s.spool = sp
	}
	sp := s.spool
	err := sp.flushFor(off + int64(n))
	s.mu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("read the data of item %s: %w", it.ItemID, err)
	}
	return sp.read(off, n, it.ItemID)
}

// Close releases the items file; the State must not be used afterwards.
func (s *State) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closeRows()
	if s.spool == nil {
		return nil
	}
	err := s.spool.close()
	s.spool = nil
	return err
}

// journalEntry is one line of checkpoint.journal: item Pos of the
// checkpoint (without its data) as of version V, and the job's item
// counts after the change.
type journalEntry struct {
	V         int             `json:"v"`
	UpdatedAt time.Time       `json:"updated_at"`
	NextAgent int             `json:"next_agent"`
	Pos       int             `json:"pos"`
	Counts    *Counts         `json:"counts,omitempty"`
	Item      *CheckpointItem `json:"item"`
}

func (s *State) flush(v uint64) error {
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	if s.flushed >= v {
		return nil
	}
	s.mu.Lock()
	snap := s.version
	s.cp.CheckpointVersion++
	s.cp.UpdatedAt = s.now().UTC()
	if !s.wroteOnce || s.full > s.flushed || s.journalSize > max(s.snapshotSize, minCompact) {
		err := s.writeSnapshotLocked()
		if err == nil {
			s.flushed = snap
		}
		return err
	}
	if s.spool != nil {
		// Journal entries may point into data spooled since the snapshot.
		if err := s.spool.sync(); err != nil {
			s.full = s.version
			s.mu.Unlock()
			return fmt.Errorf("write item data: %w", err)
		}
	}
	var buf []byte
	counts := s.counts
	// In position order: appended items are replayed in order.
	order := make([]int, 0, len(s.dirty))
	for i := range s.dirty {
		order = append(order, i)
	}
	slices.Sort(order)
	locs := make([]rowLoc, len(order))
	for k, i := range order {
		it := *s.itemAt(i)
		it.Data = nil
		line, err := json.Marshal(journalEntry{V: s.cp.CheckpointVersion, UpdatedAt: s.cp.UpdatedAt, NextAgent: s.cp.NextAgent, Pos: i, Counts: &counts, Item: &it})
		if err != nil {
			s.mu.Unlock()
			return fmt.Errorf("encode checkpoint journal: %w", err)
		}
		line = s.redactJSON(line)
		if off, n, ok := journalItem(line); ok {
			locs[k] = rowLoc{off: s.journalSize + int64(len(buf)+off), n: uint32(n), src: rowJournal}
		}
		buf = append(append(buf, line...), '\n')
	}
	clear(s.dirty)
	if s.writing == nil {
		s.writing = map[int]struct{}{}
	}
	for _, i := range order {
		s.writing[i] = struct{}{}
	}
	var sess *Session
	if now := s.now(); now.Sub(s.sessionAt) >= SessionInterval || now.Before(s.sessionAt) {
		sess = sessionOf(s.cp, counts)
		s.sessionAt = now
	}
	s.mu.Unlock()
	if err := appendSync(s.paths.CheckpointJournal(), buf); err != nil {
		// The journal may now end in a torn line or miss this version:
		// the next write is a whole snapshot, which supersedes it.
		s.mu.Lock()
		s.full = s.version
		for _, i := range order {
			delete(s.writing, i)
			s.dirty[i] = struct{}{} // not durable: kept in memory
		}
		s.mu.Unlock()
		return fmt.Errorf("write checkpoint journal: %w", err)
	}
	s.journalSize += int64(len(buf))
	s.mu.Lock()
	s.growLocs()
	for k, i := range order {
		delete(s.writing, i)
		s.setLoc(i, locs[k])
		s.evictOne(i)
	}
	s.mu.Unlock()
	if sess != nil {
		data, err := json.MarshalIndent(sess, "", "  ")
		if err == nil {
			err = writeFile(s.paths.Session(), append(s.redactJSON(data), '\n'))
		}
		if err != nil {
			return fmt.Errorf("write session: %w", err)
		}
	}
	s.flushed = snap
	return nil
}

// writeSnapshotLocked rewrites checkpoint.json and the session file and
// empties the journal. Called with s.mu held; it releases it. Item data
// still in memory is spooled (and synced) first. The snapshot is encoded
// item by item into its temporary file under the lock (no copy of the
// checkpoint is made), then synced and renamed without it.
func (s *State) writeSnapshotLocked() error {
	unlocked := false
	unlock := func() {
		if !unlocked {
			unlocked = true
			s.mu.Unlock()
		}
	}
	defer unlock()
	s.cp.FormatVersion = CheckpointFormat
	var spoolErr error
	s.eachInMemory(func(_ int, it *CheckpointItem) {
		if spoolErr == nil {
			spoolErr = s.spoolLocked(it)
		}
	})
	if spoolErr != nil {
		s.full = s.version
		return spoolErr
	}
	if s.spool != nil {
		if err := s.spool.sync(); err != nil {
			s.full = s.version
			return fmt.Errorf("write item data: %w", err)
		}
	}
	s.reindex()
	clear(s.dirty)
	s.sessionAt = s.now()
	counts := s.counts
	s.cp.ItemCounts = &counts
	sessData, err := json.MarshalIndent(sessionOf(s.cp, counts), "", "  ")
	if err != nil {
		return fmt.Errorf("encode session: %w", err)
	}
	sessData = s.redactJSON(sessData)
	path := s.paths.Checkpoint()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("write checkpoint: %w", err)
	}
	f, err := os.CreateTemp(filepath.Dir(path), fsx.TempPrefix+"*")
	if err != nil {
		return fmt.Errorf("write checkpoint: %w", err)
	}
	tmp := f.Name()
	s.pinAll = true
	size, locs, err := s.encodeSnapshotLocked(f)
	unlock()
	if err == nil {
		err = f.Chmod(filePerm)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		s.mu.Lock()
		s.full = s.version
		s.pinAll = false
		if locs != nil {
			locs.close()
		}
		s.mu.Unlock()
		return fmt.Errorf("write checkpoint: %w", err)
	}
	s.mu.Lock()
	// The new snapshot's places are completed first: until its file is
	// opened for reading, rows are read through the old places and file.
	bulk, rerr := s.completeLocs(locs)
	if rerr == nil {
		rerr = s.reopenSnapshot()
	}
	if rerr == nil {
		s.locs.close()
		s.locs = locs
		if !bulk {
			s.rows.closeBulk()
		}
	} else {
		locs.close()
		// The new snapshot cannot be read, or its places completed: read
		// every item back from the old files (the journal is emptied
		// next) and keep them.
		if err := s.fromTable(); err != nil {
			s.pinAll = false
			s.mu.Unlock()
			return fmt.Errorf("write checkpoint: read the items back: %w", err)
		}
		s.evict = false
	}
	s.pinAll = false
	s.evictLocked()
	s.mu.Unlock()
	// The snapshot holds every journal entry (their versions are not
	// above its own), so a crash before the truncation loses nothing.
	err = os.Truncate(s.paths.CheckpointJournal(), 0)
	s.mu.Lock()
	s.rows.win[rowJournal].reset()
	s.mu.Unlock()
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("empty the checkpoint journal: %w", err)
	}
	s.journalSize, s.snapshotSize, s.wroteOnce = 0, size, true
	if err := writeFile(s.paths.Session(), append(sessData, '\n')); err != nil {
		return fmt.Errorf("write session: %w", err)
	}
	return nil
}

// completeLocs makes locs, the rows' places in the snapshot just written
// (of its first locs.len() items), the places of every item: those of
// items appended since it was encoded are carried over. It reports
// whether a row is still in the bulk file (BulkAppend).
func (s *State) completeLocs(locs *locTable) (bulk bool, err error) {
	s.growLocs()
	n0 := min(locs.len(), s.itemCount())
	locs.resize(n0)
	for i := n0; i < s.itemCount(); i++ {
		l, err := s.locs.get(i)
		if err == nil {
			err = locs.push(l)
		}
		if err != nil {
			return false, err
		}
	}
	return locs.anyFrom(n0, rowBulk)
}

// encodeSnapshotLocked writes the checkpoint as JSON to w: the job's
// fields, then "items" last, one item per line (each redacted on its own).
// It returns the bytes written.
func (s *State) encodeSnapshotLocked(w io.Writer) (_ int64, _ *locTable, err error) {
	hb, err := json.Marshal(&s.cp.CheckpointHead) // an object with fields: {…}
	if err != nil {
		return 0, nil, fmt.Errorf("encode checkpoint: %w", err)
	}
	locs := newLocTable(s.locs.dir)
	defer func() {
		if err != nil {
			locs.close()
		}
	}()
	cw := &countWriter{w: bufio.NewWriterSize(w, 256<<10)}
	cw.Write(s.redactJSON(hb[:len(hb)-1]))
	cw.Write([]byte(",\"items\":[\n"))
	var line, row []byte
	for i := range s.itemCount() {
		it := s.itemAt(i)
		line = line[:0]
		if i > 0 {
			line = append(line, ",\n"...)
		}
		start := len(line)
		if it == nil {
			// Out of memory: its durable row is copied as it is.
			if row, err = s.rowBytes(i); err != nil {
				return 0, nil, fmt.Errorf("encode checkpoint item %d: %w", i, err)
			}
			line = append(line, row...)
		} else if line, err = s.appendItem(line, it); err != nil {
			return 0, nil, fmt.Errorf("encode checkpoint item %s: %w", it.ItemID, err)
		}
		if err := locs.push(rowLoc{off: cw.n + int64(start), n: uint32(len(line) - start), src: rowSnapshot}); err != nil {
			return 0, nil, fmt.Errorf("encode checkpoint item %d: %w", i, err)
		}
		cw.Write(line)
	}
	cw.Write([]byte("\n]}\n"))
	if err := cw.w.Flush(); err != nil && cw.err == nil {
		cw.err = err
	}
	return cw.n, locs, cw.err
}

// countWriter counts bytes and keeps the first error.
type countWriter struct {
	w   *bufio.Writer
	n   int64
	err error
}

func (c *countWriter) Write(p []byte) {
	if c.err != nil {
		return
	}
	n, err := c.w.Write(p)
	c.n += int64(n)
	c.err = err
}

// appendSync appends data to path (created 0600) and fsyncs it.
func appendSync(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, filePerm)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}
