package runner

// The job's process record: which step process groups of the job may
// still be running, so that a later resume or redrive of the job can end
// them first (an earlier execution may have been killed with its steps
// still running). It is one file in the job's state directory,
// process_groups.jsonl, of "start" and "end" entries; it is compacted as
// groups end. Writes are not fsynced: a kill of the runner keeps them
// (page cache), and after a reboot the groups are gone anyway.

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"sync"
)

// pgroupEntry is one line of the record.
type pgroupEntry struct {
	Op   string `json:"op"` // "start" or "end"
	PGID int    `json:"pgid"`
	Tag  string `json:"tag,omitempty"`
	// BootID and LeaderStart identify the group's leader across time (a
	// pgid means nothing after a reboot, and is reused once its group is
	// empty).
	BootID      string `json:"boot_id,omitempty"`
	LeaderStart uint64 `json:"leader_start,omitempty"`
}

// processGroupsFile is the record of job p.
func processGroupsFile(p Paths) string {
	return filepath.Join(p.JobStateDir(), "process_groups.jsonl")
}

// processRecord appends to a job's record; safe for concurrent use. A nil
// *processRecord records nothing.
type processRecord struct {
	path   string
	jobKey string

	mu    sync.Mutex
	f     *os.File
	live  map[int]pgroupEntry
	lines int
}

// openProcessRecord starts a fresh record for an execution of job p. Call
// it only after endJobLeftovers (or for a new job).
func openProcessRecord(p Paths) (*processRecord, error) {
	path := processGroupsFile(p)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open the process record: %w", err)
	}
	return &processRecord{path: path, jobKey: jobProcessKey(p), f: f, live: map[int]pgroupEntry{}}, nil
}

// started records that g's group runs.
func (r *processRecord) started(g *stepGroup) error {
	if r == nil {
		return nil
	}
	boot, start := leaderIdentity(g.pgid)
	e := pgroupEntry{Op: "start", PGID: g.pgid, Tag: g.tag, BootID: boot, LeaderStart: start}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.live[g.pgid] = e
	return r.append(e)
}

// ended records that g's group is gone.
func (r *processRecord) ended(g *stepGroup) error {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.live, g.pgid)
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
	return r.append(pgroupEntry{Op: "end", PGID: g.pgid})
}

// close closes the record's file (the record stays on disk).
func (r *processRecord) close() {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.f.Close()
}

func (r *processRecord) append(e pgroupEntry) error {
	line, err := json.Marshal(e)
	if err != nil {
		return err
	}
	if _, err := r.f.Write(append(line, '\n')); err != nil {
		return fmt.Errorf("write the process record: %w", err)
	}
	r.lines++
	return nil
}

// compact rewrites the record as its live entries (temp file and rename).
func (r *processRecord) compact() error {
	pgids := make([]int, 0, len(r.live))
	for pg := range r.live {
		pgids = append(pgids, pg)
	}
	sort.Ints(pgids)
	var buf []byte
	for _, pg := range pgids {
		line, err := json.Marshal(r.live[pg])
		if err != nil {
			return err
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

// readProcessRecord returns the groups job p's record lists as started and
// not ended (none when there is no record).
func readProcessRecord(p Paths) ([]pgroupEntry, error) {
	f, err := os.Open(processGroupsFile(p))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the process record: %w", err)
	}
	defer f.Close()
	live := map[int]pgroupEntry{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var e pgroupEntry
		if json.Unmarshal(sc.Bytes(), &e) != nil {
			continue // a line torn by a crash
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
	out := make([]pgroupEntry, 0, len(live))
	for _, e := range live {
		out = append(out, e)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].PGID < out[b].PGID })
	return out, nil
}

// endJobLeftovers ends every process an earlier execution of job p left
// running (recorded groups and processes tagged with the job), waits until
// they are gone, and logs what it did. Resume and redrive call it right
// after taking the job lock, before anything else runs: the lock proves the
// earlier runner is gone, and no old agent writes after this returns.
func endJobLeftovers(p Paths, logf func(string, ...any)) error {
	groups, err := readProcessRecord(p)
	if err != nil {
		return err
	}
	n, err := endLeftoverProcesses(p, groups)
	if n > 0 {
		logf("ended %d process(es) an earlier run of job %s left running", n, p.JobID)
	}
	return err
}

func shortHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:8])
}
