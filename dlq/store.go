package dlq

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/prodigy-action/prodigy-action/internal/fsx"
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
	// FlushDelay is how long index.json may lag behind an Add or Remove
	// (the journal covers the gap); 0 means DefaultFlushDelay, negative
	// rewrites index.json inside every Add and Remove. On large queues the
	// delay grows to 10× the last index write (at most 2 s) so rewriting
	// the index stays a small share of the time.
	FlushDelay time.Duration
	// Redact is applied to the JSON bytes of every item file and of
	// index.json before they are written (redact.Redactor.JSON); nil
	// writes them as they are.
	Redact func(jsonText []byte) []byte
}

// Store is the DLQ of one job. It is safe for concurrent use by many
// goroutines, and by several processes on the same host: writers serialise
// through an in-process mutex plus flock(2) on dlq.lock in the job
// directory. Item files are written atomically (temporary file, fsync,
// rename) before Add returns. index.json is derived from items/: every
// membership change is appended to index.journal at once and index.json is
// rewritten within FlushDelay (or by Flush/Close), so the index never
// disagrees with items/ at rest; after a crash the next operation rebuilds
// it from items/ (see docs/dlq.md). Call Close when done.
// openStores counts the stores opened and not closed yet in this process.
var openStores atomic.Int64

// OpenStores is how many stores of this process are open (opened, not yet
// closed): a leak test's measure, since an unclosed store may hold an
// unwritten index.
func OpenStores() int64 { return openStores.Load() }

type Store struct {
	root, jobID   string
	dir, itemsDir string
	opts          Options
	closed        atomic.Bool

	mu         sync.Mutex
	idx        *indexState // nil until loaded under the lock
	stale      bool        // index.json lags the journal
	timer      *time.Timer
	timerArmed bool
	flushes    sync.WaitGroup // armed or running timer flushes
	lastWrite  time.Duration  // duration of the last index.json write
}

// Dir returns the directory that holds a job's index.json and items/
// inside root, the folder the caller assigns to the job's DLQ (jobstore's
// dlq/<repo>/<job_id>): root/mapreduce/dlq/<jobID>, the seeds' layout.
func Dir(root, jobID string) string {
	return filepath.Join(root, "mapreduce", "dlq", jobID)
}

// checkSegment rejects names that are not a single path element. Job ids
// may not start with '.' either: Clear renames a job's root to
// ".<name>.cleared-…" and job listings ignore such names.
func checkSegment(what, s string, noDot bool) error {
	if s == "" || s == "." || s == ".." || noDot && strings.HasPrefix(s, ".") || strings.ContainsAny(s, "/\\\x00") {
		return fmt.Errorf("invalid dlq %s %q: must be one file name without '/', '\\' or NUL", what, s)
	}
	return nil
}

// Open returns the store of job jobID whose DLQ lives under root, a
// directory that belongs to this job's DLQ alone (the caller decides where:
// the store never computes state-directory paths). It creates nothing:
// directories and files appear on the first write, and reading a job
// without a DLQ yields an empty store.
func Open(root, jobID string, o Options) (*Store, error) {
	if root == "" {
		return nil, errors.New("dlq: no directory given")
	}
	if err := checkSegment("job id", jobID, true); err != nil {
		return nil, err
	}
	if o.Capacity == 0 {
		o.Capacity = DefaultCapacity
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.FlushDelay == 0 {
		o.FlushDelay = DefaultFlushDelay
	}
	if o.Warn == nil {
		o.Warn = func(msg string) { fmt.Fprintln(os.Stderr, "warning: "+msg) }
	}
	if o.Redact == nil {
		o.Redact = func(b []byte) []byte { return b }
	}
	dir := Dir(root, jobID)
	openStores.Add(1)
	return &Store{root: filepath.Clean(root), jobID: jobID, dir: dir, itemsDir: filepath.Join(dir, "items"), opts: o}, nil
}

// JobID returns the store's job id.
func (s *Store) JobID() string { return s.jobID }

// Dir returns the job's DLQ directory (Dir(root, jobID)).
func (s *Store) Dir() string { return s.dir }

// ItemPath returns the path of the file that stores itemID.
func (s *Store) ItemPath(itemID string) string {
	return filepath.Join(s.itemsDir, ItemFileName(itemID))
}

// Add stores item and returns the stored record. A new id becomes a new
// record (when the store is full, the max(Capacity/10, 1) records with the
// oldest last_attempt are evicted first, reported through Warn and
// OnEvict). For an id already stored, the new failure_history entries are
// appended (attempt numbers kept as given), failure_count grows by their
// number, first_attempt is the earlier and last_attempt the later of the
// two; error_signature, reprocess_eligible, manual_review_required,
// item_data (unless null) and worktree_artifacts (unless nil) come from
// item, which is taken to be the newest failure.
func (s *Store) Add(item DeadLetteredItem) (DeadLetteredItem, error) {
	if err := validID(item.ItemID); err != nil {
		return DeadLetteredItem{}, err
	}
	if len(item.ItemData) > 0 && !json.Valid(item.ItemData) {
		return DeadLetteredItem{}, fmt.Errorf("dlq item %q: item_data is not valid JSON", item.ItemID)
	}
	var stored DeadLetteredItem
	var evicted []string
	err := s.withLock(true, func(l *lockFile) error {
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

func validID(id string) error {
	if id == "" || !utf8.ValidString(id) {
		return fmt.Errorf("%w: %q", ErrInvalidID, id)
	}
	return nil
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
	data = s.opts.Redact(data)
	stored, err := Decode(data)
	if err != nil {
		return DeadLetteredItem{}, nil, err
	}
	if contains(s.idx.set, item.ItemID) {
		// Same membership: only the item file changes.
		return stored, nil, fsx.WriteFile(filepath.Join(s.itemsDir, name), data, 0o644)
	}
	if err := s.markDirty(l); err != nil {
		return DeadLetteredItem{}, nil, err
	}
	evicted, err := s.evictLocked()
	if err != nil {
		return DeadLetteredItem{}, evicted, err
	}
	if err := fsx.WriteFile(filepath.Join(s.itemsDir, name), data, 0o644); err != nil {
		return DeadLetteredItem{}, evicted, err
	}
	if err := s.journal('+', item.ItemID); err != nil {
		return DeadLetteredItem{}, evicted, err
	}
	s.idx.add(item.ItemID)
	return stored, evicted, s.changed(l)
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

// evictLocked makes room for one new record. It does work only when the
// store is full, i.e. once per Capacity/10 new ids, so its O(n log n) scan
// is amortised to O(log n) file reads per add.
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

// removeLocked deletes the files of ids, journals the removal and drops
// them from the in-memory index. The caller has marked the lock dirty.
func (s *Store) removeLocked(ids []string) error {
	gone := make(map[string]bool, len(ids))
	for _, id := range ids {
		if err := os.Remove(s.ItemPath(id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove dlq item %q: %w", id, err)
		}
		gone[id] = true
	}
	if err := s.journal('-', ids...); err != nil {
		return err
	}
	s.idx.remove(gone)
	return nil
}

// Remove deletes the record of itemID (a redrive succeeded). A missing
// record is not an error.
func (s *Store) Remove(itemID string) error {
	err := s.withLock(false, func(l *lockFile) error {
		if !contains(s.idx.set, itemID) {
			return nil
		}
		if err := s.markDirty(l); err != nil {
			return err
		}
		if err := s.removeLocked([]string{itemID}); err != nil {
			return err
		}
		return s.changed(l)
	})
	if err != nil {
		return fmt.Errorf("remove dlq item %q from job %s: %w", itemID, s.jobID, err)
	}
	return nil
}

// Flush rewrites index.json now if this store left it lagging behind the
// journal; it does nothing (and touches no file) otherwise.
func (s *Store) Flush() error {
	s.mu.Lock()
	stale := s.stale
	s.mu.Unlock()
	if !stale {
		return nil
	}
	err := s.withLock(false, func(l *lockFile) error {
		if !s.stale {
			return nil
		}
		return s.writeIndex(l)
	})
	if err != nil {
		return fmt.Errorf("flush dlq index of job %s: %w", s.jobID, err)
	}
	return nil
}

// Close waits for or cancels the background flush, then flushes. The
// store stays usable.
func (s *Store) Close() error {
	if s.closed.CompareAndSwap(false, true) {
		openStores.Add(-1)
	}
	s.mu.Lock()
	if s.timerArmed && s.timer.Stop() {
		s.timerArmed = false
		s.flushes.Done()
	}
	s.mu.Unlock()
	s.flushes.Wait()
	return s.Flush()
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

func (s *Store) readItemFile(name string) (DeadLetteredItem, error) {
	bp := readBufs.Get().(*[]byte)
	defer readBufs.Put(bp)
	b, err := readAll(filepath.Join(s.itemsDir, name), (*bp)[:0])
	*bp = b
	if err != nil {
		return DeadLetteredItem{}, err
	}
	return Decode(b)
}

// readBufs recycles read buffers; Decode copies what it keeps.
var readBufs = sync.Pool{New: func() any { b := make([]byte, 0, 16<<10); return &b }}

// readAll is os.ReadFile into buf, without the stat call.
func readAll(path string, buf []byte) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return buf, err
	}
	defer f.Close()
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := f.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}

// Each calls fn for every record, in item file name order (ItemFileName
// order, which is item id order for ids made of letters, digits, '-' and
// '_'). Files are read and decoded by a few goroutines, eachChunk at a
// time, so memory stays flat (the sorted file names plus one chunk); fn is
// called from the caller's goroutine, one record at a time. A file that
// cannot be read or parsed is reported through Warn, naming it, and
// skipped; a file removed meanwhile is skipped silently. If fn returns
// ErrStop, Each stops and returns nil; any other error is returned as is.
// Each takes no lock and sees every record whole.
func (s *Store) Each(fn func(DeadLetteredItem) error) error {
	all, err := readDirNames(s.itemsDir)
	if err != nil {
		return err
	}
	names := all[:0]
	for _, name := range all {
		if !strings.HasPrefix(name, ".") && strings.HasSuffix(name, itemExt) {
			names = append(names, name)
		}
	}
	workers := min(max(runtime.GOMAXPROCS(0)*2, 2), 16)
	buf := make([]loaded, min(eachChunk, len(names)))
	for start := 0; start < len(names); start += eachChunk {
		chunk := names[start:min(start+eachChunk, len(names))]
		var next atomic.Int64
		var wg sync.WaitGroup
		for range min(workers, len(chunk)) {
			wg.Go(func() {
				for i := int(next.Add(1) - 1); i < len(chunk); i = int(next.Add(1) - 1) {
					buf[i] = s.load(chunk[i])
				}
			})
		}
		wg.Wait()
		for i, name := range chunk {
			r := buf[i]
			buf[i] = loaded{}
			if errors.Is(r.err, fs.ErrNotExist) {
				continue
			}
			if r.err != nil {
				s.opts.Warn(fmt.Sprintf("dlq %s: skipping corrupt item file %s: %v", s.jobID, filepath.Join(s.itemsDir, name), r.err))
				continue
			}
			if err := fn(r.d); err != nil {
				if errors.Is(err, ErrStop) {
					return nil
				}
				return err
			}
		}
	}
	return nil
}

// eachChunk is how many files Each reads ahead.
const eachChunk = 256

type loaded struct {
	d   DeadLetteredItem
	err error
}

func (s *Store) load(name string) loaded {
	d, err := s.readItemFile(name)
	if err == nil && ItemFileName(d.ItemID) != name {
		err = fmt.Errorf("item_id %q does not belong in this file", d.ItemID)
	}
	return loaded{d: d, err: err}
}

// Count returns the number of records (index repaired first if needed).
func (s *Store) Count() (int, error) {
	n := 0
	err := s.withLock(false, func(*lockFile) error {
		n = len(s.idx.ids)
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("count dlq items of job %s: %w", s.jobID, err)
	}
	return n, nil
}

// Index is the content of index.json. ItemIDs keeps insertion order;
// UpdatedAt is when index.json was last rewritten.
type Index struct {
	JobID     string    `json:"job_id"`
	ItemCount int       `json:"item_count"`
	ItemIDs   []string  `json:"item_ids"`
	UpdatedAt time.Time `json:"updated_at"`
}

// Index flushes and returns the content of index.json, reconciled with
// items/. A job without a DLQ has an empty index.
func (s *Store) Index() (Index, error) {
	ix := Index{JobID: s.jobID, ItemIDs: []string{}}
	err := s.withLock(false, func(l *lockFile) error {
		if s.stale {
			if err := s.writeIndex(l); err != nil {
				return err
			}
		}
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

// Clear deletes the job's whole DLQ (its root directory): the directory is
// renamed away under the lock, then removed, so readers see all or
// nothing. Clearing a job without a DLQ is not an error.
func (s *Store) Clear() error {
	root := s.root
	err := s.withLock(false, func(*lockFile) error {
		trash := filepath.Join(filepath.Dir(root), fmt.Sprintf(".%s.cleared-%d-%d", filepath.Base(root), os.Getpid(), time.Now().UnixNano()))
		if err := os.Rename(root, trash); err != nil {
			return err
		}
		s.idx, s.stale = nil, false
		return os.RemoveAll(trash)
	})
	if err != nil {
		return fmt.Errorf("clear dlq of job %s: %w", s.jobID, err)
	}
	return nil
}

// Purge deletes the records whose last_attempt is before olderThan and
// returns how many it deleted; index.json is rewritten before it returns.
// Unreadable files are reported and kept.
func (s *Store) Purge(olderThan time.Time) (int, error) {
	var n int
	err := s.withLock(false, func(l *lockFile) error {
		var old []string
		for _, id := range s.idx.ids {
			d, err := s.readItemFile(ItemFileName(id))
			if err != nil {
				if !errors.Is(err, fs.ErrNotExist) {
					s.opts.Warn(fmt.Sprintf("dlq %s: purge keeps unreadable item file %s: %v", s.jobID, s.ItemPath(id), err))
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
		return s.writeIndex(l)
	})
	if err != nil {
		return n, fmt.Errorf("purge dlq of job %s: %w", s.jobID, err)
	}
	return n, nil
}
