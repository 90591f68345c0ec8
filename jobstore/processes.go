package jobstore

// The job's process record: which step process groups of the job may
// still be running, so that a later resume or redrive of the job can end
// them first (an earlier execution may have been killed with its steps
// still running). It is one file in the job's state directory,
// process_groups.jsonl, of "start" and "end" entries; it is compacted as
// groups end. Writes are not fsynced: a kill of the runner keeps them
// (page cache), and after a reboot the groups are gone anyway.

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"sync"
)

// ProcessGroup is one line of the record.
type ProcessGroup struct {
	Op   string `json:"op"` // "start" or "end"
	PGID int    `json:"pgid"`
	Tag  string `json:"tag,omitempty"`
	// BootID and LeaderStart identify the group's leader across time (a
	// pgid means nothing after a reboot, and is reused once its group is
	// empty).
	BootID      string `json:"boot_id,omitempty"`
	LeaderStart uint64 `json:"leader_start,omitempty"`
}

// ProcessRecord is the job's process record file.
func (p Paths) ProcessRecord() string {
	return filepath.Join(p.JobStateDir(), "process_groups.jsonl")
}

// ProcessRecord appends to a job's record; safe for concurrent use. A nil
// *ProcessRecord records nothing.
type ProcessRecord struct {
	path string

	mu    sync.Mutex
	f     *os.File
	live  map[int]ProcessGroup
	lines int
}

// OpenProcessRecord starts a fresh (empty) record for an execution of job
// p. Call it only after the groups an earlier execution recorded were
// ended (or for a new job).
func OpenProcessRecord(p Paths) (*ProcessRecord, error) {
	path := p.ProcessRecord()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open the process record: %w", err)
	}
	return &ProcessRecord{path: path, f: f, live: map[int]ProcessGroup{}}, nil
}

// Started records that group g runs (g.Op is set to "start").
func (r *ProcessRecord) Started(g ProcessGroup) error {
	if r == nil {
		return nil
	}
	g.Op = "start"
	r.mu.Lock()
	defer r.mu.Unlock()
	r.live[g.PGID] = g
	return r.append(g)
}

// Ended records that group pgid is gone.
func (r *ProcessRecord) Ended(pgid int) error {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.live, pgid)
	if len(r.live) == 0 {
		r.lines = 0
		if err := r.f.Truncate(0); err != nil {
			return fmt.Errorf("truncate the process record: %w", err)
		}
		return nil
	}
	if r.lines >= 64+4*len(r.live) {
		return r.compact()
	}
	return r.append(ProcessGroup{Op: "end", PGID: pgid})
}

// Close closes the record's file (the record stays on disk).
func (r *ProcessRecord) Close() {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.f.Close()
}

func (r *ProcessRecord) append(e ProcessGroup) error {
	line, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("encode the process record: %w", err)
	}
	if _, err := r.f.Write(append(line, '\n')); err != nil {
		return fmt.Errorf("write the process record: %w", err)
	}
	r.lines++
	return nil
}

// compact rewrites the record as its live entries (temp file and rename).
func (r *ProcessRecord) compact() error {
	pgids := make([]int, 0, len(r.live))
	for pg := range r.live {
		pgids = append(pgids, pg)
	}
	sort.Ints(pgids)
	var buf []byte
	for _, pg := range pgids {
		line, err := json.Marshal(r.live[pg])
		if err != nil {
			return fmt.Errorf("encode the process record: %w", err)
		}
		buf = append(append(buf, line...), '\n')
	}
	tmp := r.path + ".tmp"
	if err := os.WriteFile(tmp, buf, 0o644); err != nil {
		return fmt.Errorf("compact the process record: %w", err)
	}
	if err := os.Rename(tmp, r.path); err != nil {
		return fmt.Errorf("compact the process record: %w", err)
	}
	f, err := os.OpenFile(r.path, os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("reopen the process record: %w", err)
	}
	r.f.Close()
	r.f = f
	r.lines = len(pgids)
	return nil
}

// ReadProcessRecord returns the groups job p's record lists as started and
// not ended, by pgid (none when there is no record). A line torn by a
// crash is skipped.
func ReadProcessRecord(p Paths) ([]ProcessGroup, error) {
	f, err := os.Open(p.ProcessRecord())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the process record: %w", err)
	}
	defer f.Close()
	live := map[int]ProcessGroup{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var e ProcessGroup
		if json.Unmarshal(sc.Bytes(), &e) != nil {
			continue
		}
		switch e.Op {
		case "start":
			live[e.PGID] = e
		case "end":
			delete(live, e.PGID)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read the process record: %w", err)
	}
	out := make([]ProcessGroup, 0, len(live))
	for _, e := range live {
		out = append(out, e)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].PGID < out[b].PGID })
	return out, nil
}
