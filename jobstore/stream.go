package jobstore

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
)

// StreamCheckpoint reads a job's checkpoint as LoadCheckpoint does, but
// without holding its items: head gets every job-level field with Items
// nil and ItemCounts the counts of exactly the items that follow; then
// item gets each item, journal entries applied, in position order (the
// *CheckpointItem is only valid during the call). Memory does not grow
// with the number of items, only with the journal's entries newer than
// the snapshot (an index of 16 bytes each; their text is copied to a
// temporary file). The snapshot is read through one open file, so a
// compaction while it streams changes nothing it reads; one that happens
// before the journal is read is detected and both are read again. A
// checkpoint of an older version (no counts) is loaded whole.
func StreamCheckpoint(p Paths, head func(*Checkpoint) error, item func(*CheckpointItem) error) error {
	for try := 0; ; try++ {
		err := streamOnce(p, try < 5, head, item)
		if errors.Is(err, errJournalGap) {
			continue
		}
		if errors.Is(err, errNoCounts) {
			return streamLoaded(p, head, item)
		}
		return err
	}
}

// errNoCounts: the snapshot predates item counts (read it whole).
var errNoCounts = errors.New("checkpoint without item counts")

func streamLoaded(p Paths, head func(*Checkpoint) error, item func(*CheckpointItem) error) error {
	cp, err := LoadCheckpoint(p)
	if err != nil {
		return err
	}
	items := cp.Items
	n := cp.Counts()
	cp.ItemCounts, cp.Items = &n, nil
	if err := head(cp); err != nil {
		return err
	}
	for _, it := range items {
		if err := item(it); err != nil {
			return err
		}
	}
	return nil
}

// journalIndex is the journal's entries newer than a snapshot, copied to
// a temporary file: for each position, where its newest entry is.
type journalIndex struct {
	f    *os.File
	at   map[int][2]int64 // pos → offset, length in f
	last *journalEntry
}

func (j *journalIndex) close() {
	if j.f != nil {
		j.f.Close()
		os.Remove(j.f.Name())
	}
}

// entry reads the newest entry of pos, or nil.
func (j *journalIndex) entry(pos int) (*journalEntry, error) {
	loc, ok := j.at[pos]
	if !ok {
		return nil, nil
	}
	buf := make([]byte, loc[1])
	if _, err := j.f.ReadAt(buf, loc[0]); err != nil {
		return nil, fmt.Errorf("read the journal's copy: %w", err)
	}
	var e journalEntry
	if err := json.Unmarshal(buf, &e); err != nil {
		return nil, fmt.Errorf("read the journal's copy: %w", err)
	}
	return &e, nil
}

// indexJournal copies the journal's entries newer than base (contiguous
// versions, stopping at a torn or foreign line as replayJournal does).
func indexJournal(path string, base int, strict bool) (*journalIndex, error) {
	j := &journalIndex{at: map[int][2]int64{}}
	src, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return j, nil
	}
	if err != nil {
		return nil, err
	}
	defer src.Close()
	var w *bufio.Writer
	var off int64
	err = walkJournal(src, base, strict, func(e *journalEntry, line []byte, _ int64) error {
		if j.f == nil {
			var err error
			if j.f, err = os.CreateTemp("", "prodigy-journal-*"); err != nil {
				return fmt.Errorf("copy the checkpoint journal: %w", err)
			}
			w = bufio.NewWriterSize(j.f, 64<<10)
		}
		if _, err := w.Write(line); err != nil {
			return fmt.Errorf("copy the checkpoint journal: %w", err)
		}
		j.at[e.Pos] = [2]int64{off, int64(len(line))}
		off += int64(len(line))
		e.Item = nil
		j.last = e
		return nil
	})
	if err != nil {
		j.close()
		return nil, err
	}
	if w != nil {
		if err := w.Flush(); err != nil {
			j.close()
			return nil, fmt.Errorf("copy the checkpoint journal: %w", err)
		}
	}
	return j, nil
}

func streamOnce(p Paths, strict bool, head func(*Checkpoint) error, item func(*CheckpointItem) error) error {
	f, err := os.Open(p.Checkpoint())
	if err != nil {
		return fmt.Errorf("job %s: read checkpoint: %w", p.JobID, err)
	}
	defer f.Close()
	dec := json.NewDecoder(bufio.NewReaderSize(f, 256<<10))
	cp, atItems, err := decodeHead(dec, p.Checkpoint())
	if err != nil {
		return fmt.Errorf("job %s: read checkpoint: %w", p.JobID, err)
	}
	if cp.FormatVersion < minFormat || cp.FormatVersion > CheckpointFormat {
		return fmt.Errorf("job %s: checkpoint format %d is not supported (this version reads %d to %d)", p.JobID, cp.FormatVersion, minFormat, CheckpointFormat)
	}
	if cp.ItemCounts == nil || !atItems {
		return errNoCounts
	}
	j, err := indexJournal(p.CheckpointJournal(), cp.CheckpointVersion, strict)
	if err != nil {
		if errors.Is(err, errJournalGap) {
			return err
		}
		return fmt.Errorf("job %s: read checkpoint journal: %w", p.JobID, err)
	}
	defer j.close()
	if e := j.last; e != nil {
		if e.Counts == nil {
			return errNoCounts
		}
		cp.CheckpointVersion, cp.UpdatedAt = e.V, e.UpdatedAt
		cp.NextAgent = max(cp.NextAgent, e.NextAgent)
		cp.ItemCounts = e.Counts
	}
	if err := head(cp); err != nil {
		return err
	}
	bad := func(err error) error { return fmt.Errorf("job %s: read checkpoint items: %w", p.JobID, err) }
	if t, err := dec.Token(); err != nil || t != json.Delim('[') {
		if err == nil && t == nil { // "items": null
			return streamAppended(j, 0, item, bad)
		}
		return bad(fmt.Errorf("items is not an array"))
	}
	pos := 0
	for ; dec.More(); pos++ {
		var it CheckpointItem
		if err := dec.Decode(&it); err != nil {
			return bad(err)
		}
		e, err := j.entry(pos)
		if err != nil {
			return bad(err)
		}
		cur := &it
		if e != nil {
			if e.Item.DataLen == 0 {
				e.Item.Data, e.Item.DataOff, e.Item.DataLen = it.Data, it.DataOff, it.DataLen
			}
			cur = e.Item
		}
		cur.pos = pos
		if err := item(cur); err != nil {
			return err
		}
	}
	return streamAppended(j, pos, item, bad)
}

// streamAppended streams the items the journal appended after the
// snapshot's n (positions n, n+1, … as replayJournal appends them).
func streamAppended(j *journalIndex, n int, item func(*CheckpointItem) error, bad func(error) error) error {
	var extra []int
	for pos := range j.at {
		if pos >= n {
			extra = append(extra, pos)
		}
	}
	slices.Sort(extra)
	for k, pos := range extra {
		if pos != n+k {
			break // a gap (flushes write positions in order: never made)
		}
		e, err := j.entry(pos)
		if err != nil {
			return bad(err)
		}
		e.Item.pos = pos
		if err := item(e.Item); err != nil {
			return err
		}
	}
	return nil
}
