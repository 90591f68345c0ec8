package jobstore

// Items out of memory: once a State evicts rows (EvictRows), an item the
// engine does not hold is kept only where its newest durable row is (its
// line of checkpoint.json, or of checkpoint.journal) and read back from
// there when it is needed, so a running job's memory does not grow with
// its items: the items in memory are in an itemTable, the rows' places
// in a locTable that keeps most of its pages in a file.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/prodigy-action/prodigy-action/internal/fsx"
)

// Where an item's newest durable row is.
const (
	rowNone     uint8 = iota // only in memory (never written, or changed since)
	rowSnapshot              // a line of checkpoint.json
	rowJournal               // the item object of a line of checkpoint.journal
	rowBulk                  // a line of the bulk file (BulkAppend), not yet in a snapshot
)

// rowLoc locates an item's newest durable row: n bytes at off of src.
type rowLoc struct {
	off int64
	n   uint32
	src uint8
}

// rowFiles are the open read handles of the files rows are read from.
// The snapshot's handle is of the file the locations point into (a
// renamed-over snapshot stays readable through it until it is replaced).
type rowFiles struct {
	snap    *os.File
	journal *os.File
	// bulk holds the rows BulkAppend wrote (an unlinked temporary file,
	// written through bulkW) until a snapshot has them.
	bulk     *os.File
	bulkW    *bufio.Writer
	bulkSize int64
	// win are the read windows, by row source.
	win [4]rowWindow
}

// closeBulk drops the bulk file (its rows are in a snapshot).
func (f *rowFiles) closeBulk() {
	if f.bulk != nil {
		_ = f.bulk.Close()
		f.bulk, f.bulkW, f.bulkSize = nil, nil, 0
		f.win[rowBulk].reset()
	}
}

func (f *rowFiles) close() {
	f.closeBulk()
	if f.snap != nil {
		_ = f.snap.Close()
		f.snap = nil
	}
	if f.journal != nil {
		_ = f.journal.Close()
		f.journal = nil
	}
}

// EvictRows makes the state keep, from now on, only the items held
// (Hold) or changed and not yet written in memory: every other item is
// dropped once its row is durable and read back from the checkpoint's
// files when it is needed (Read, Update and UpdateItems read every item
// back first; Scan reads one at a time). Pointers to items obtained from
// Read, Update or UpdateItems are valid only during the call; Hold gives
// one that stays valid until Release.
func (s *State) EvictRows() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.evict = true
	if s.tab == nil {
		s.toTable()
	}
	s.evictLocked()
}

// growLocs keeps the locations' length the number of items.
func (s *State) growLocs() {
	if n := s.itemCount(); s.locs.len() != n {
		s.locs.resize(n)
	}
}

// locOf is where item i's newest durable row is; rowNone when that
// cannot be read (the item is then kept in memory).
func (s *State) locOf(i int) rowLoc {
	l, err := s.locs.get(i)
	if err != nil {
		return rowLoc{}
	}
	return l
}

// setLoc records where item i's newest durable row is. When that cannot
// be recorded, the item stays in memory as changed, to be written again.
func (s *State) setLoc(i int, l rowLoc) {
	if err := s.locs.set(i, l); err != nil {
		s.dirty[i] = struct{}{}
	}
}

// evictLocked drops every item that is not held, not dirty and has a
// durable row.
func (s *State) evictLocked() {
	if !s.evict || s.pinAll {
		return
	}
	s.growLocs()
	s.eachInMemory(func(i int, it *CheckpointItem) {
		if s.held[i] == 0 && it.Data == nil && !s.unwritten(i) && s.locOf(i).src != rowNone {
			s.setItem(i, nil)
		}
	})
}

// evictOne drops item i if nothing keeps it in memory.
func (s *State) evictOne(i int) {
	if !s.evict || s.pinAll || i >= s.locs.len() || i >= s.itemCount() || s.held[i] > 0 || s.unwritten(i) {
		return
	}
	if it := s.itemAt(i); it != nil && it.Data == nil && s.locOf(i).src != rowNone {
		s.setItem(i, nil)
	}
}

// unwritten reports whether item i changed since its row was made
// durable, or is being written.
func (s *State) unwritten(i int) bool {
	_, dirty := s.dirty[i]
	_, writing := s.writing[i]
	return dirty || writing
}

// rowBytes reads the durable row of item i. The bytes are valid until
// the next read of a row (they may be the read window's).
func (s *State) rowBytes(i int) ([]byte, error) {
	loc, err := s.locs.get(i)
	if err != nil {
		return nil, err
	}
	var f *os.File
	switch loc.src {
	case rowSnapshot:
		if s.rows.snap == nil {
			return nil, fmt.Errorf("item %d: the checkpoint snapshot is not open", i)
		}
		f = s.rows.snap
	case rowBulk:
		if s.rows.bulk == nil {
			return nil, fmt.Errorf("item %d: the bulk file is not open", i)
		}
		if err := s.rows.bulkW.Flush(); err != nil {
			return nil, err
		}
		f = s.rows.bulk
	case rowJournal:
		if s.rows.journal == nil {
			if s.rows.journal, err = os.Open(s.paths.CheckpointJournal()); err != nil {
				return nil, err
			}
		}
		f = s.rows.journal
	default:
		return nil, fmt.Errorf("item %d has no durable row", i)
	}
	return s.rows.win[loc.src].read(f, loc.off, int(loc.n))
}

// windowSize is how much of a file one read of rows brings in: items are
// mostly read in position order, which is mostly file order.
const windowSize = 256 << 10

// rowWindow is the last stretch of a file read for rows.
type rowWindow struct {
	buf []byte
	off int64
}

// read returns n bytes at off of f, from the window when it holds them.
func (w *rowWindow) read(f *os.File, off int64, n int) ([]byte, error) {
	if off >= w.off && off+int64(n) <= w.off+int64(len(w.buf)) {
		return w.buf[off-w.off : off-w.off+int64(n)], nil
	}
	if n > windowSize/2 {
		b := make([]byte, n)
		if _, err := f.ReadAt(b, off); err != nil {
			return nil, err
		}
		return b, nil
	}
	if cap(w.buf) < windowSize {
		w.buf = make([]byte, windowSize)
	}
	w.buf = w.buf[:windowSize]
	k, err := f.ReadAt(w.buf, off)
	if k < n {
		w.buf = w.buf[:0]
		if err == nil {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	w.buf, w.off = w.buf[:k], off
	return w.buf[:n], nil
}

// reset forgets the window (its file changed under it).
func (w *rowWindow) reset() { w.buf = w.buf[:0] }

// decodeRow reads item i's durable row into a new item.
func (s *State) decodeRow(i int) (*CheckpointItem, error) { return s.rowItem(i, nil) }

// rowItem reads item i's durable row into a new item when maybe (nil:
// always) accepts the row; nil, nil when it refuses it (not decoded).
func (s *State) rowItem(i int, maybe func(row []byte) bool) (*CheckpointItem, error) {
	b, err := s.rowBytes(i)
	if err != nil {
		return nil, fmt.Errorf("read checkpoint item %d: %w", i, err)
	}
	if maybe != nil && !maybe(b) {
		return nil, nil
	}
	it := &CheckpointItem{}
	if err := json.Unmarshal(b, it); err != nil {
		return nil, fmt.Errorf("read checkpoint item %d: %w", i, err)
	}
	it.pos = i
	return it, nil
}

// materialize returns item i, reading it back if it was evicted.
func (s *State) materialize(i int) (*CheckpointItem, error) {
	if it := s.itemAt(i); it != nil {
		return it, nil
	}
	it, err := s.decodeRow(i)
	if err != nil {
		return nil, err
	}
	s.setItem(i, it)
	return it, nil
}

// unpack reads every item out of memory back and hands them all to
// cp.Items (full access: Read, Update, UpdateItems); pack takes them
// back. A row that cannot be read (an I/O failure of the job's own
// fsynced files) is an error, cp.Items is left alone and the items read
// stay in memory.
func (s *State) unpack() error {
	if s.tab == nil {
		return nil
	}
	items, err := s.allItems()
	if err != nil {
		return err
	}
	s.cp.Items = items
	return nil
}

// pack takes the items of cp.Items (unpack; fn may have appended to it or
// cut it short) back into the state's itemTable.
func (s *State) pack() {
	if s.tab != nil {
		s.toTable()
	}
}

// Len is the number of the job's items.
func (s *State) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.itemCount()
}

// Scan calls fn with each item and its position, in position order, under the state's lock,
// until it returns false. An evicted item is read back into a value only
// valid during the call and not kept: fn must neither keep nor change the
// item (use Hold and UpdateItem to change one).
func (s *State) Scan(fn func(pos int, it *CheckpointItem) bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.itemCount() {
		it := s.itemAt(i)
		if it == nil {
			var err error
			if it, err = s.decodeRow(i); err != nil {
				return err
			}
		}
		if !fn(i, it) {
			return nil
		}
	}
	return nil
}

// Next returns the position of the first item at or after from that
// want accepts (-1: none), reading items out of memory one at a time:
// maybe (nil: every row), given such an item's JSON row, says whether
// want may accept it, and a row it refuses is not decoded (RowHas). The
// item want sees is only valid during the call.
func (s *State) Next(from int, maybe func(row []byte) bool, want func(it *CheckpointItem) bool) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := max(from, 0); i < s.itemCount(); i++ {
		it := s.itemAt(i)
		if it == nil {
			var err error
			if it, err = s.rowItem(i, maybe); err != nil {
				return -1, err
			}
			if it == nil {
				continue // refused undecoded
			}
		}
		if want(it) {
			return i, nil
		}
	}
	return -1, nil
}

// Check reports what want says of item pos, read back for the call if it
// is out of memory (the item want sees is only valid during the call).
func (s *State) Check(pos int, want func(it *CheckpointItem) bool) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if pos < 0 || pos >= s.itemCount() {
		return false, fmt.Errorf("jobstore: no item at position %d", pos)
	}
	it := s.itemAt(pos)
	if it == nil {
		var err error
		if it, err = s.decodeRow(pos); err != nil {
			return false, err
		}
	}
	return want(it), nil
}

// Hold returns item pos, kept in memory until as many Releases: the
// pointer UpdateItem and ItemData take.
func (s *State) Hold(pos int) (*CheckpointItem, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if pos < 0 || pos >= s.itemCount() {
		return nil, fmt.Errorf("jobstore: no item at position %d", pos)
	}
	it, err := s.materialize(pos)
	if err != nil {
		return nil, err
	}
	if s.held == nil {
		s.held = map[int]int{}
	}
	s.held[pos]++
	return it, nil
}

// Release ends a Hold of it; the state may then drop it from memory.
func (s *State) Release(it *CheckpointItem) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i, ok := s.pos(it)
	if !ok || s.held[i] == 0 {
		return
	}
	if s.held[i]--; s.held[i] == 0 {
		delete(s.held, i)
		s.evictOne(i)
	}
}

// Current is the checkpoint's item at it's position when it is a value
// of the same item that the state has since replaced (read back after it
// was dropped from memory), else it: use it inside UpdateItems for items
// obtained before the call.
func (c *Checkpoint) Current(it *CheckpointItem) *CheckpointItem {
	if it.pos >= 0 && it.pos < len(c.Items) {
		if cur := c.Items[it.pos]; cur != nil && cur != it && cur.ItemID == it.ItemID {
			return cur
		}
	}
	return it
}

// BulkAppend adds items (not yet in the checkpoint) at its end without
// making them durable: their rows go to a temporary file and they leave
// memory at once (EvictRows). The next Update or UpdateHead writes them
// with the snapshot, as if they had been appended in it; a crash before
// that loses them (use it for items that count only from that write on,
// as a job's items before its setup is recorded done). Their data is
// spooled first (SpoolItem).
func (s *State) BulkAppend(items []*CheckpointItem) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.rows.bulk == nil {
		dir := filepath.Dir(s.paths.Checkpoint())
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("write checkpoint items: %w", err)
		}
		f, err := os.CreateTemp(dir, fsx.TempPrefix+"rows-*")
		if err != nil {
			return fmt.Errorf("write checkpoint items: %w", err)
		}
		_ = os.Remove(f.Name()) // read and written through f only
		s.rows.bulk, s.rows.bulkW = f, bufio.NewWriterSize(f, 256<<10)
	}
	var line []byte
	var err error
	for _, it := range items {
		if err := s.spoolLocked(it); err != nil {
			return err
		}
		if line, err = s.appendItem(line[:0], it); err != nil {
			return fmt.Errorf("encode checkpoint item %s: %w", it.ItemID, err)
		}
		if _, err := s.rows.bulkW.Write(line); err != nil {
			return fmt.Errorf("write checkpoint items: %w", err)
		}
		it.pos = s.itemCount()
		s.pushItem(nil)
		s.growLocs()
		s.rows.bulkSize += int64(len(line))
		s.counts.add(it, 1)
		s.counts.Total++
		err := s.locs.set(it.pos, rowLoc{off: s.rows.bulkSize - int64(len(line)), n: uint32(len(line)), src: rowBulk})
		if err != nil || !s.evict || s.pinAll {
			s.setItem(it.pos, it) // kept in memory (the snapshot writes it)
		}
	}
	s.version++
	s.full = s.version
	return nil
}

// journalItem returns where, in a journal line, its item object is.
func journalItem(line []byte) (off, n int, ok bool) {
	k := bytes.Index(line, []byte(`,"item":`))
	if k < 0 || len(line) < k+10 || line[len(line)-1] != '}' {
		return 0, 0, false
	}
	off = k + len(`,"item":`)
	return off, len(line) - 1 - off, true
}

// reopenSnapshot opens the snapshot just written for reading rows.
func (s *State) reopenSnapshot() error {
	f, err := os.Open(s.paths.Checkpoint())
	if err != nil {
		return err
	}
	if s.rows.snap != nil {
		_ = s.rows.snap.Close()
	}
	s.rows.snap = f
	s.rows.win[rowSnapshot].reset()
	return nil
}

// closeRows releases the read handles.
func (s *State) closeRows() {
	s.rows.close()
	s.locs.close()
}
