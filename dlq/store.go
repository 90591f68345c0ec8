package dlq

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// DefaultCapacity is the number of records a job's DLQ keeps before it
// evicts the oldest 10%.
const DefaultCapacity = 10000

// Errors returned by the store (wrapped with context; test with errors.Is).
var (
	// ErrNotFound: no record for the item id.
	ErrNotFound = errors.New("dlq item not found")
	// ErrNameCollision: the item file already holds another id (ids that
	// differ only in case on a case-insensitive file system).
	ErrNameCollision = errors.New("dlq item file holds another item id")
	// ErrInvalidID: an empty item id, or one that is not valid UTF-8 (JSON
	// could not round-trip it).
	ErrInvalidID = errors.New("invalid dlq item id")
	// ErrStop may be returned by an Each callback to end the walk early;
	// Each then returns nil.
	ErrStop = errors.New("stop iteration")
)

// Options configures a Store. Zero values mean the defaults.
type Options struct {
	// Capacity is the maximum number of records; adding a new id to a full
	// store first evicts max(Capacity/10, 1) records with the oldest
	// last_attempt. 0 means DefaultCapacity; negative means unlimited.
	Capacity int
	// Now stamps index.json's updated_at; nil means time.Now.
	Now func() time.Time
	// Warn receives non-fatal problems (corrupt item files, a rebuilt
	// index, evictions); nil writes them to os.Stderr.
	Warn func(msg string)
	// OnEvict is called with the evicted ids after an Add that evicted, once
	// the store is unlocked (the runner emits dlq_items_evicted from it).
	OnEvict func(ids []string)
}

// Store is the DLQ of one job. It is safe for concurrent use by many
// goroutines, and by several processes on the same host: writers serialise
// through an in-process mutex plus flock(2) on dlq.lock in the job
// directory. Item files are written atomically (temporary file, fsync,
// rename); index.json is derived from items/ and kept in agreement with it
// after every operation; a crash between the two writes is repaired by the
// next operation (see docs/dlq.md).
type Store struct {
	home, repo, jobID string
	dir, itemsDir     string
	opts              Options

	mu  sync.Mutex
	idx *indexState // nil until loaded under the lock
}

// indexState is the in-memory copy of index.json.
type indexState struct {
	gen       uint64
	ids       []string
	set       map[string]struct{}
	body      []byte // the item_ids entries as written, joined by ",\n"
	updatedAt time.Time
}

// JobDir returns the DLQ directory of a job:
// <home>/dlq/<repo>/<jobID>/mapreduce/dlq/<jobID>.
func JobDir(home, repo, jobID string) string {
	return filepath.Join(home, "dlq", repo, jobID, "mapreduce", "dlq", jobID)
}

func checkSegment(what, s string) error {
	if s == "" || s == "." || s == ".." || strings.HasPrefix(s, ".") || strings.ContainsAny(s, "/\\\x00") {
		return fmt.Errorf("invalid dlq %s %q: must be a non-empty file name without '/', '\\', NUL or a leading '.'", what, s)
	}
	return nil
}

// Open returns the store of job jobID of repository repo under home. It
// creates nothing: directories and files appear on the first write, and
// reading a job without a DLQ yields an empty store.
func Open(home, repo, jobID string, o Options) (*Store, error) {
	if err := checkSegment("repo", repo); err != nil {
		return nil, err
	}
	if err := checkSegment("job id", jobID); err != nil {
		return nil, err
	}
	if o.Capacity == 0 {
		o.Capacity = DefaultCapacity
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Warn == nil {
		o.Warn = func(msg string) { fmt.Fprintln(os.Stderr, "warning: "+msg) }
	}
	dir := JobDir(home, repo, jobID)
	return &Store{home: home, repo: repo, jobID: jobID, dir: dir, itemsDir: filepath.Join(dir, "items"), opts: o}, nil
}

// JobID returns the store's job id.
func (s *Store) JobID() string { return s.jobID }

// Repo returns the store's repository name.
func (s *Store) Repo() string { return s.repo }

// Dir returns the job's DLQ directory (JobDir).
func (s *Store) Dir() string { return s.dir }

// ItemPath returns the path of the file that stores itemID.
func (s *Store) ItemPath(itemID string) string {
	return filepath.Join(s.itemsDir, ItemFileName(itemID))
}

// withLock runs fn holding the mutex and the file lock, after bringing the
// in-memory index up to date. With create false and no job directory, fn is
// not called and withLock returns false.
func (s *Store) withLock(create bool, fn func(l *lockFile) error) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if create {
		if err := os.MkdirAll(s.itemsDir, 0o755); err != nil {
			return false, fmt.Errorf("create dlq directory: %w", err)
		}
	} else if _, err := os.Stat(s.dir); errors.Is(err, fs.ErrNotExist) {
		s.idx = nil
		return false, nil
	}
	l, err := openLock(s.dir)
	if err != nil {
		return false, err
	}
	defer l.release()
	if err := s.refresh(l); err != nil {
		return true, err
	}
	return true, fn(l)
}

// refresh loads or reloads the index when this store has not loaded it yet,
// another store changed it, or a writer crashed mid-operation.
func (s *Store) refresh(l *lockFile) error {
	gen, dirty := l.state()
	if s.idx != nil && !dirty && gen == s.idx.gen {
		return nil
	}
	if s.idx != nil && !dirty {
		if st, err := s.readIndex(); err == nil {
			st.gen = gen
			s.idx = st
			return nil
		}
	}
	return s.reconcile(l, gen)
}

type indexFile struct {
	JobID     string    `json:"job_id"`
	ItemCount int       `json:"item_count"`
	ItemIDs   []string  `json:"item_ids"`
	UpdatedAt time.Time `json:"updated_at"`
}

func (s *Store) readIndex() (*indexState, error) {
	b, err := os.ReadFile(filepath.Join(s.dir, "index.json"))
	if err != nil {
		return nil, err
	}
	var f indexFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("parse index.json: %w", err)
	}
	if f.JobID != s.jobID || f.ItemCount != len(f.ItemIDs) {
		return nil, fmt.Errorf("index.json is inconsistent")
	}
	st := newIndexState(f.ItemIDs)
	if len(st.ids) != len(f.ItemIDs) {
		return nil, fmt.Errorf("index.json lists duplicate ids")
	}
	st.updatedAt = f.UpdatedAt
	return st, nil
}

func newIndexState(ids []string) *indexState {
	st := &indexState{set: make(map[string]struct{}, len(ids))}
	for _, id := range ids {
		if _, dup := st.set[id]; dup {
			continue
		}
		st.set[id] = struct{}{}
		st.ids = append(st.ids, id)
		st.appendBody(id)
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

// reconcile rebuilds the in-memory index from items/ (the source of truth),
// keeping index.json's order for ids it already listed and appending new
// ones sorted, and rewrites index.json if it disagreed.
func (s *Store) reconcile(l *lockFile, gen uint64) error {
	onDisk, err := s.scanItemIDs()
	if err != nil {
		return err
	}
	old, oldErr := s.readIndex()
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
	if agrees {
		st.updatedAt = old.updatedAt
		s.idx = st
		if _, dirty := l.state(); dirty {
			return s.commit(l)
		}
		return nil
	}
	s.idx = st
	if oldErr != nil && errors.Is(oldErr, fs.ErrNotExist) && len(st.ids) == 0 {
		return nil // nothing stored, nothing to repair
	}
	if oldErr == nil || !errors.Is(oldErr, fs.ErrNotExist) {
		s.opts.Warn(fmt.Sprintf("dlq %s: index.json disagreed with items/ (%v); rebuilt with %d items", s.jobID, describe(oldErr), len(st.ids)))
	}
	return s.writeIndexAndCommit(l)
}

func describe(err error) string {
	if err == nil {
		return "different item ids"
	}
	return err.Error()
}

func contains(set map[string]struct{}, id string) bool {
	_, ok := set[id]
	return ok
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

func (s *Store) readItemFile(name string) (DeadLetteredItem, error) {
	b, err := os.ReadFile(filepath.Join(s.itemsDir, name))
	if err != nil {
		return DeadLetteredItem{}, err
	}
	return Decode(b)
}

// markDirty announces a membership change: a crash before commit makes the
// next locker reconcile.
func (s *Store) markDirty(l *lockFile) error { return l.set(s.idx.gen+1, true) }

// commit ends an operation: a new generation tells other stores to reload.
func (s *Store) commit(l *lockFile) error {
	s.idx.gen++
	return l.set(s.idx.gen, false)
}

// writeIndexAndCommit writes index.json from memory and commits. index.json
// is renamed into place atomically but not fsynced: it is derived data that
// every store's first load checks against items/.
func (s *Store) writeIndexAndCommit(l *lockFile) error {
	if err := s.markDirty(l); err != nil {
		return err
	}
	s.idx.updatedAt = s.opts.Now().UTC()
	if err := writeFileAtomic(s.dir, "index.json", s.indexBytes(), false); err != nil {
		return fmt.Errorf("write dlq index: %w", err)
	}
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

func validID(id string) error {
	if id == "" || !utf8.ValidString(id) {
		return fmt.Errorf("%w: %q", ErrInvalidID, id)
	}
	return nil
}

// Add stores item. A new id becomes a new record (evicting the oldest 10%
// first when the store is at capacity). For an id already stored the new
// failure_history entries are appended (attempt numbers kept as given),
// failure_count grows by their number, first_attempt is the earlier of the
// two and last_attempt the later; error_signature, reprocess_eligible,
// manual_review_required, item_data (unless null) and worktree_artifacts
// (unless nil) come from item, the newest failure. Add returns the stored
// record. Evictions are reported through Warn and OnEvict.
func (s *Store) Add(item DeadLetteredItem) (DeadLetteredItem, error) {
	if err := validID(item.ItemID); err != nil {
		return DeadLetteredItem{}, err
	}
	if len(item.ItemData) > 0 && !json.Valid(item.ItemData) {
		return DeadLetteredItem{}, fmt.Errorf("dlq item %q: item_data is not valid JSON", item.ItemID)
	}
	var stored DeadLetteredItem
	var evicted []string
	_, err := s.withLock(true, func(l *lockFile) error {
		var err error
		stored, evicted, err = s.addLocked(l, item)
		return err
	})
	if len(evicted) > 0 {
		s.opts.Warn(fmt.Sprintf("dlq %s: capacity %d reached; evicted %d records with the oldest last_attempt", s.jobID, s.opts.Capacity, len(evicted)))
		if s.opts.OnEvict != nil {
			s.opts.OnEvict(evicted)
		}
	}
	if err != nil {
		return DeadLetteredItem{}, fmt.Errorf("add dlq item %q to job %s: %w", item.ItemID, s.jobID, err)
	}
	return stored, nil
}

func (s *Store) addLocked(l *lockFile, item DeadLetteredItem) (DeadLetteredItem, []string, error) {
	name := ItemFileName(item.ItemID)
	existing, err := s.readItemFile(name)
	switch {
	case err == nil && existing.ItemID != item.ItemID:
		return DeadLetteredItem{}, nil, fmt.Errorf("%w: %s holds %q", ErrNameCollision, name, existing.ItemID)
	case err == nil:
		item = merge(existing, item)
	case errors.Is(err, fs.ErrNotExist):
	default:
		s.opts.Warn(fmt.Sprintf("dlq %s: replacing unreadable item file %s: %v", s.jobID, filepath.Join(s.itemsDir, name), err))
	}
	data, err := Encode(item)
	if err != nil {
		return DeadLetteredItem{}, nil, err
	}
	isNew := !contains(s.idx.set, item.ItemID)
	var evicted []string
	if isNew {
		if err := s.markDirty(l); err != nil {
			return DeadLetteredItem{}, nil, err
		}
		if evicted, err = s.evictLocked(); err != nil {
			return DeadLetteredItem{}, evicted, err
		}
	}
	if err := writeFileAtomic(s.itemsDir, name, data, true); err != nil {
		return DeadLetteredItem{}, evicted, err
	}
	if isNew {
		s.idx.add(item.ItemID)
		if err := s.writeIndexAndCommit(l); err != nil {
			return DeadLetteredItem{}, evicted, err
		}
	}
	stored, _ := Decode(data)
	return stored, evicted, nil
}

// merge appends a new failure of an existing record (see Add).
func merge(old, item DeadLetteredItem) DeadLetteredItem {
	out := item
	if len(item.ItemData) == 0 || string(item.ItemData) == "null" {
		out.ItemData = old.ItemData
	}
	out.FailureHistory = append(append([]FailureDetail{}, old.FailureHistory...), item.FailureHistory...)
	out.FailureCount = old.FailureCount + uint32(len(item.FailureHistory))
	out.FirstAttempt = old.FirstAttempt
	if old.FirstAttempt.IsZero() || (!item.FirstAttempt.IsZero() && item.FirstAttempt.Before(old.FirstAttempt)) {
		out.FirstAttempt = item.FirstAttempt
	}
	if old.LastAttempt.After(item.LastAttempt) {
		out.LastAttempt = old.LastAttempt
	}
	if item.WorktreeArtifacts == nil {
		out.WorktreeArtifacts = old.WorktreeArtifacts
	}
	return out
}

// evictLocked makes room for one new record. It runs only when the store is
// full, i.e. once per Capacity/10 new ids, so its O(n log n) is amortised.
func (s *Store) evictLocked() ([]string, error) {
	capacity := s.opts.Capacity
	if capacity < 0 || len(s.idx.ids) < capacity {
		return nil, nil
	}
	n := max(capacity/10, 1, len(s.idx.ids)-capacity+1)
	type aged struct {
		id   string
		last time.Time
	}
	all := make([]aged, 0, len(s.idx.ids))
	for _, id := range s.idx.ids {
		d, err := s.readItemFile(ItemFileName(id))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			s.opts.Warn(fmt.Sprintf("dlq %s: unreadable item file %s counts as oldest: %v", s.jobID, s.ItemPath(id), err))
		}
		all = append(all, aged{id: id, last: d.LastAttempt})
	}
	sort.Slice(all, func(i, j int) bool {
		if !all[i].last.Equal(all[j].last) {
			return all[i].last.Before(all[j].last)
		}
		return all[i].id < all[j].id
	})
	ids := make([]string, 0, n)
	for _, a := range all[:n] {
		ids = append(ids, a.id)
	}
	return ids, s.removeLocked(ids)
}

// removeLocked deletes the files of ids and drops them from the in-memory
// index (the caller writes index.json).
func (s *Store) removeLocked(ids []string) error {
	gone := make(map[string]bool, len(ids))
	for _, id := range ids {
		if err := os.Remove(s.ItemPath(id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove dlq item %q: %w", id, err)
		}
		gone[id] = true
	}
	s.idx.remove(gone)
	return nil
}

// Remove deletes the record of itemID (a redrive succeeded). A missing
// record is not an error.
func (s *Store) Remove(itemID string) error {
	_, err := s.withLock(false, func(l *lockFile) error {
		if !contains(s.idx.set, itemID) {
			return nil
		}
		if err := s.markDirty(l); err != nil {
			return err
		}
		if err := s.removeLocked([]string{itemID}); err != nil {
			return err
		}
		return s.writeIndexAndCommit(l)
	})
	if err != nil {
		return fmt.Errorf("remove dlq item %q from job %s: %w", itemID, s.jobID, err)
	}
	return nil
}

// Get reads the record of itemID; a missing record is ErrNotFound (wrapped).
// Get takes no lock: item files are replaced atomically.
func (s *Store) Get(itemID string) (*DeadLetteredItem, error) {
	name := ItemFileName(itemID)
	d, err := s.readItemFile(name)
	if errors.Is(err, fs.ErrNotExist) || err == nil && d.ItemID != itemID {
		return nil, fmt.Errorf("%w: %q in job %s", ErrNotFound, itemID, s.jobID)
	}
	if err != nil {
		return nil, fmt.Errorf("read dlq item file %s: %w", filepath.Join(s.itemsDir, name), err)
	}
	return &d, nil
}

// Each calls fn for every record, in item file name order (ItemFileName
// order, which is item id order for ids made of letters, digits, '-' and
// '_'). It reads one file at a time, so memory stays flat. A file that
// cannot be read or parsed is reported through Warn, naming it, and
// skipped; a file removed meanwhile is skipped silently. If fn returns
// ErrStop, Each stops and returns nil; any other error is returned as is.
// Each takes no lock and sees a consistent record per file.
func (s *Store) Each(fn func(DeadLetteredItem) error) error {
	names, err := readDirNames(s.itemsDir)
	if err != nil {
		return err
	}
	for _, name := range names {
		if strings.HasPrefix(name, ".") || !strings.HasSuffix(name, itemExt) {
			continue
		}
		d, err := s.readItemFile(name)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err == nil && ItemFileName(d.ItemID) != name {
			err = fmt.Errorf("item_id %q does not belong in this file", d.ItemID)
		}
		if err != nil {
			s.opts.Warn(fmt.Sprintf("dlq %s: skipping corrupt item file %s: %v", s.jobID, filepath.Join(s.itemsDir, name), err))
			continue
		}
		if err := fn(d); err != nil {
			if errors.Is(err, ErrStop) {
				return nil
			}
			return err
		}
	}
	return nil
}

// Count returns the number of records (from the index, repaired first if it
// disagrees with items/).
func (s *Store) Count() (int, error) {
	ix, err := s.Index()
	return ix.ItemCount, err
}

// Index returns the content of index.json, reconciled with items/.
func (s *Store) Index() (Index, error) {
	ix := Index{JobID: s.jobID, ItemIDs: []string{}}
	_, err := s.withLock(false, func(*lockFile) error {
		ix.ItemCount = len(s.idx.ids)
		ix.ItemIDs = append(ix.ItemIDs, s.idx.ids...)
		ix.UpdatedAt = s.idx.updatedAt
		return nil
	})
	if err != nil {
		return Index{}, fmt.Errorf("read dlq index of job %s: %w", s.jobID, err)
	}
	return ix, nil
}

// Index is the content of index.json. ItemIDs keeps insertion order;
// UpdatedAt is the last time the set of ids changed.
type Index struct {
	JobID     string    `json:"job_id"`
	ItemCount int       `json:"item_count"`
	ItemIDs   []string  `json:"item_ids"`
	UpdatedAt time.Time `json:"updated_at"`
}

// Clear deletes the job's whole DLQ (<home>/dlq/<repo>/<job_id>): the
// directory is renamed away under the lock, then removed, so readers see
// all or nothing. Clearing a job without a DLQ is not an error.
func (s *Store) Clear() error {
	root := filepath.Join(s.home, "dlq", s.repo, s.jobID)
	_, err := s.withLock(false, func(*lockFile) error {
		trash := filepath.Join(s.home, "dlq", s.repo, fmt.Sprintf(".%s.cleared-%d-%d", s.jobID, os.Getpid(), time.Now().UnixNano()))
		if err := os.Rename(root, trash); err != nil {
			return err
		}
		s.idx = nil
		return os.RemoveAll(trash)
	})
	if err != nil {
		return fmt.Errorf("clear dlq of job %s: %w", s.jobID, err)
	}
	return nil
}

// Purge deletes the records whose last_attempt is before olderThan and
// returns how many it deleted. Unreadable files are reported and kept.
func (s *Store) Purge(olderThan time.Time) (int, error) {
	var n int
	_, err := s.withLock(false, func(l *lockFile) error {
		var old []string
		for _, id := range s.idx.ids {
			d, err := s.readItemFile(ItemFileName(id))
			if err != nil {
				if !errors.Is(err, fs.ErrNotExist) {
					s.opts.Warn(fmt.Sprintf("dlq %s: purge skips unreadable item file %s: %v", s.jobID, s.ItemPath(id), err))
				}
				continue
			}
			if d.LastAttempt.Before(olderThan) {
				old = append(old, id)
			}
		}
		if len(old) == 0 {
			return nil
		}
		if err := s.markDirty(l); err != nil {
			return err
		}
		if err := s.removeLocked(old); err != nil {
			return err
		}
		n = len(old)
		return s.writeIndexAndCommit(l)
	})
	if err != nil {
		return n, fmt.Errorf("purge dlq of job %s: %w", s.jobID, err)
	}
	return n, nil
}
