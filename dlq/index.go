package dlq

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/prodigy-action/prodigy-action/internal/fsx"
)

// The index of a job is index.json plus index.journal: writers append one
// line per membership change to the journal ("+<json id>" or "-<json id>")
// and rewrite index.json shortly after (Options.FlushDelay), truncating the
// journal. index.json + journal always equals the ids in items/, and
// index.json alone equals them once flushed. dlq.lock holds
// "<generation> clean|dirty": a writer marks it dirty before touching
// items/ and clean after its journal line, so a crash in between makes the
// next locker rebuild the index from items/.

const (
	indexName   = "index.json"
	journalName = "index.journal"
	// DefaultFlushDelay is how long index.json may lag the journal.
	DefaultFlushDelay = 20 * time.Millisecond
	// maxFlushDelay bounds the adaptive delay (10× the last index write).
	maxFlushDelay = 2 * time.Second
)

// indexState is the in-memory copy of the index.
type indexState struct {
	gen       uint64
	ids       []string
	set       map[string]struct{}
	body      []byte // the item_ids entries as written, joined by ",\n"
	updatedAt time.Time
}

type indexFile struct {
	JobID     string    `json:"job_id"`
	ItemCount int       `json:"item_count"`
	ItemIDs   []string  `json:"item_ids"`
	UpdatedAt time.Time `json:"updated_at"`
}

func newIndexState(ids []string) *indexState {
	st := &indexState{set: make(map[string]struct{}, len(ids))}
	for _, id := range ids {
		if _, dup := st.set[id]; !dup {
			st.add(id)
		}
	}
	return st
}

func (st *indexState) appendBody(id string) {
	q, _ := json.Marshal(id)
	if len(st.body) > 0 {
		st.body = append(st.body, ",\n"...)
	}
	st.body = append(st.body, "    "...)
	st.body = append(st.body, q...)
}

func (st *indexState) add(id string) {
	st.set[id] = struct{}{}
	st.ids = append(st.ids, id)
	st.appendBody(id)
}

func (st *indexState) remove(ids map[string]bool) {
	kept := st.ids[:0]
	for _, id := range st.ids {
		if ids[id] {
			delete(st.set, id)
			continue
		}
		kept = append(kept, id)
	}
	st.ids = kept
	st.body = st.body[:0]
	for _, id := range st.ids {
		st.appendBody(id)
	}
}

func contains(set map[string]struct{}, id string) bool {
	_, ok := set[id]
	return ok
}

// withLock runs fn holding the mutex and the file lock, after bringing the
// in-memory index up to date. With create false and no job directory, fn is
// not called.
func (s *Store) withLock(create bool, fn func(l *lockFile) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.withFileLock(create, fn)
}

func (s *Store) withFileLock(create bool, fn func(l *lockFile) error) (err error) {
	if create {
		if err := os.MkdirAll(s.itemsDir, 0o755); err != nil {
			return fmt.Errorf("create dlq directory: %w", err)
		}
	} else if _, err := os.Stat(s.dir); errors.Is(err, fs.ErrNotExist) {
		s.idx, s.stale = nil, false
		return nil
	}
	l, err := openLock(s.dir)
	if err != nil {
		return err
	}
	defer func() {
		if rerr := l.release(); rerr != nil {
			err = errors.Join(err, rerr)
		}
	}()
	if err := s.refresh(l); err != nil {
		return err
	}
	return fn(l)
}

// refresh loads the index on first use, reloads it (index.json + journal)
// when another store changed it, and rebuilds it from items/ after a crash.
func (s *Store) refresh(l *lockFile) error {
	gen, dirty := l.state()
	if s.idx != nil && !dirty && gen == s.idx.gen {
		return nil
	}
	if s.idx != nil && !dirty {
		if st, journaled, err := s.loadIndex(); err == nil {
			st.gen = gen
			s.idx, s.stale = st, journaled > 0
			return nil
		}
	}
	return s.reconcile(l, gen)
}

// loadIndex reads index.json (missing = empty) and replays the journal. It
// returns the number of journal lines replayed.
func (s *Store) loadIndex() (*indexState, int, error) {
	st, err := s.readIndexFile()
	if errors.Is(err, fs.ErrNotExist) {
		st, err = newIndexState(nil), nil
	}
	if err != nil {
		return nil, 0, err
	}
	n, err := s.replayJournal(st)
	return st, n, err
}

func (s *Store) readIndexFile() (*indexState, error) {
	b, err := os.ReadFile(filepath.Join(s.dir, indexName))
	if err != nil {
		return nil, err
	}
	var f indexFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("parse index.json: %w", err)
	}
	if f.JobID != s.jobID || f.ItemCount != len(f.ItemIDs) {
		return nil, fmt.Errorf("index.json is inconsistent (job_id %q, item_count %d, %d ids)", f.JobID, f.ItemCount, len(f.ItemIDs))
	}
	st := newIndexState(f.ItemIDs)
	if len(st.ids) != len(f.ItemIDs) {
		return nil, fmt.Errorf("index.json lists duplicate ids")
	}
	st.updatedAt = f.UpdatedAt
	return st, nil
}

func (s *Store) replayJournal(st *indexState) (int, error) {
	b, err := os.ReadFile(filepath.Join(s.dir, journalName))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	n := 0
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) < 3 {
			return n, fmt.Errorf("malformed journal line %q", line)
		}
		var id string
		if err := json.Unmarshal(line[1:], &id); err != nil {
			return n, fmt.Errorf("malformed journal line %q: %w", line, err)
		}
		switch line[0] {
		case '+':
			if !contains(st.set, id) {
				st.add(id)
			}
		case '-':
			if contains(st.set, id) {
				st.remove(map[string]bool{id: true})
			}
		default:
			return n, fmt.Errorf("malformed journal line %q", line)
		}
		n++
	}
	return n, sc.Err()
}

// journal appends membership changes: '+' for added ids, '-' for removed.
func (s *Store) journal(op byte, ids ...string) error {
	var b bytes.Buffer
	for _, id := range ids {
		q, _ := json.Marshal(id)
		b.WriteByte(op)
		b.Write(q)
		b.WriteByte('\n')
	}
	f, err := os.OpenFile(filepath.Join(s.dir, journalName), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("open dlq journal: %w", err)
	}
	if _, err := f.Write(b.Bytes()); err != nil {
		_ = f.Close()
		return fmt.Errorf("append dlq journal: %w", err)
	}
	return f.Close()
}

// reconcile rebuilds the index from items/ (the source of truth), keeping
// the indexed order for ids already listed and appending the others sorted,
// then writes index.json if it differs.
func (s *Store) reconcile(l *lockFile, gen uint64) error {
	onDisk, err := s.scanItemIDs()
	if err != nil {
		return err
	}
	old, journaled, oldErr := s.loadIndex()
	var order []string
	if oldErr == nil {
		for _, id := range old.ids {
			if onDisk[id] {
				order = append(order, id)
			}
		}
	}
	var extra []string
	for id := range onDisk {
		if old == nil || !contains(old.set, id) {
			extra = append(extra, id)
		}
	}
	sort.Strings(extra)
	st := newIndexState(append(order, extra...))
	st.gen = gen
	agrees := oldErr == nil && len(old.ids) == len(st.ids) && len(extra) == 0
	_, indexErr := os.Stat(filepath.Join(s.dir, indexName))
	s.idx = st
	if agrees {
		st.updatedAt = old.updatedAt
		if journaled == 0 && indexErr == nil {
			_, dirty := l.state()
			if dirty {
				return s.commit(l)
			}
			return nil
		}
	} else if oldErr != nil || indexErr == nil || journaled > 0 {
		s.opts.Warn(fmt.Sprintf("dlq %s: index disagreed with items/ (%s); rebuilt with %d items", s.jobID, describe(oldErr), len(st.ids)))
	}
	if len(st.ids) == 0 && errors.Is(indexErr, fs.ErrNotExist) && journaled == 0 {
		return nil // nothing stored, nothing to write
	}
	return s.writeIndex(l)
}

func describe(err error) string {
	if err == nil {
		return "different item ids"
	}
	return err.Error()
}

// scanItemIDs lists the ids stored in items/, removing temporary files left
// by crashed writers (every temporary file there is written under the lock).
func (s *Store) scanItemIDs() (map[string]bool, error) {
	names, err := readDirNames(s.itemsDir)
	if err != nil {
		return nil, err
	}
	ids := make(map[string]bool, len(names))
	for _, name := range names {
		if strings.HasPrefix(name, tmpPrefix) {
			_ = os.Remove(filepath.Join(s.itemsDir, name))
			continue
		}
		if id, ok := ItemIDFromFileName(name); ok {
			ids[id] = true
			continue
		}
		if isHashedName(name) {
			d, err := s.readItemFile(name)
			if err != nil {
				s.opts.Warn(fmt.Sprintf("dlq %s: skipping unreadable item file %s: %v", s.jobID, filepath.Join(s.itemsDir, name), err))
				continue
			}
			if ItemFileName(d.ItemID) == name {
				ids[d.ItemID] = true
			}
		}
	}
	return ids, nil
}

func readDirNames(dir string) ([]string, error) {
	f, err := os.Open(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", dir, err)
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", dir, err)
	}
	sort.Strings(names)
	return names, nil
}

// markDirty announces that items/ is about to change.
func (s *Store) markDirty(l *lockFile) error { return l.set(s.idx.gen+1, true) }

// commit ends an operation: a new clean generation tells other stores to
// reload index.json + journal.
func (s *Store) commit(l *lockFile) error {
	s.idx.gen++
	return l.set(s.idx.gen, false)
}

// changed finishes a membership change that is already in items/ and the
// journal: commit, then write index.json now (FlushDelay < 0) or soon.
func (s *Store) changed(l *lockFile) error {
	if err := s.commit(l); err != nil {
		return err
	}
	s.stale = true
	if s.opts.FlushDelay < 0 {
		return s.writeIndex(l)
	}
	if !s.timerArmed {
		s.timerArmed = true
		s.flushes.Add(1)
		// Keep index rewrites under ~10% of the time on large queues.
		delay := min(max(s.opts.FlushDelay, 10*s.lastWrite), maxFlushDelay)
		if s.timer == nil {
			s.timer = time.AfterFunc(delay, s.flushFromTimer)
		} else {
			s.timer.Reset(delay)
		}
	}
	return nil
}

func (s *Store) flushFromTimer() {
	defer s.flushes.Done()
	s.mu.Lock()
	s.timerArmed = false
	s.mu.Unlock()
	if err := s.Flush(); err != nil {
		s.opts.Warn(err.Error())
	}
}

// writeIndex writes index.json from memory, empties the journal and
// commits. index.json is renamed into place atomically but not fsynced: it
// is derived data that every store's first load checks against items/. A
// crash between the rename and the truncation is harmless: replaying the
// journal over the new index.json changes nothing.
func (s *Store) writeIndex(l *lockFile) error {
	s.idx.updatedAt = s.opts.Now().UTC()
	start := time.Now()
	if err := fsx.WriteFileNoSync(filepath.Join(s.dir, indexName), s.opts.Redact(s.indexBytes()), 0o644); err != nil {
		return fmt.Errorf("write dlq index: %w", err)
	}
	s.lastWrite = time.Since(start)
	if err := os.Truncate(filepath.Join(s.dir, journalName), 0); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("truncate dlq journal: %w", err)
	}
	s.stale = false
	return s.commit(l)
}

func (s *Store) indexBytes() []byte {
	st := s.idx
	jobID, _ := json.Marshal(s.jobID)
	at, _ := st.updatedAt.MarshalJSON()
	var b bytes.Buffer
	b.Grow(len(st.body) + 128)
	fmt.Fprintf(&b, "{\n  \"job_id\": %s,\n  \"item_count\": %d,\n  \"item_ids\": [", jobID, len(st.ids))
	if len(st.ids) > 0 {
		b.WriteString("\n")
		b.Write(st.body)
		b.WriteString("\n  ")
	}
	fmt.Fprintf(&b, "],\n  \"updated_at\": %s\n}\n", at)
	return b.Bytes()
}
