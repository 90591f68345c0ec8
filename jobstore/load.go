package jobstore

// Reading a checkpoint back: whole with its journal replayed
// (LoadCheckpoint), or its head and counts only (LoadSummary).

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
)

// HasCheckpoint reports whether the job has a checkpoint on disk.
func HasCheckpoint(p Paths) bool {
	_, err := os.Stat(p.Checkpoint())
	return err == nil
}

// CheckpointStamp identifies the checkpoint as it is on disk (size and
// modification time of the snapshot and of the journal): every durable
// write changes it. A reader that loaded the checkpoint before taking the
// job's lock compares stamps to know whether to load it again.
func CheckpointStamp(p Paths) string {
	var b strings.Builder
	for _, path := range []string{p.Checkpoint(), p.CheckpointJournal()} {
		fi, err := os.Stat(path)
		if err != nil {
			b.WriteString("-;")
			continue
		}
		fmt.Fprintf(&b, "%d:%d;", fi.Size(), fi.ModTime().UnixNano())
	}
	return b.String()
}

// LoadCheckpoint reads a job's checkpoint: checkpoint.json with the
// journal's newer entries applied (a torn last line, from a crash during
// its write, is ignored). A reader that races a compaction (the journal
// it finds does not continue the snapshot it read) reads both again.
func LoadCheckpoint(p Paths) (*Checkpoint, error) {
	for try := 0; ; try++ {
		var cp Checkpoint
		if err := readJSON(p.Checkpoint(), &cp); err != nil {
			return nil, fmt.Errorf("job %s: read checkpoint: %w", p.JobID, err)
		}
		if cp.FormatVersion < minFormat || cp.FormatVersion > CheckpointFormat {
			return nil, fmt.Errorf("job %s: checkpoint format %d is not supported (this version reads %d to %d)", p.JobID, cp.FormatVersion, minFormat, CheckpointFormat)
		}
		err := replayJournal(p.CheckpointJournal(), &cp, try < 5)
		if errors.Is(err, errJournalGap) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("job %s: read checkpoint journal: %w", p.JobID, err)
		}
		return &cp, nil
	}
}

// errJournalGap: the journal skips versions after the snapshot (it was
// compacted between reading the two).
var errJournalGap = errors.New("the journal does not continue the snapshot")

// replayJournal applies the journal entries newer than cp (walkJournal).
func replayJournal(path string, cp *Checkpoint, strict bool) error {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	return walkJournal(f, cp.CheckpointVersion, strict, func(e *journalEntry, _ []byte, _ int64) error {
		if e.Pos == len(cp.Items) {
			// An item appended since the snapshot (State.UpdateItems).
			cp.Items = append(cp.Items, e.Item)
		}
		if e.Pos < 0 || e.Pos >= len(cp.Items) {
			return nil
		}
		if e.Item.DataLen == 0 {
			old := cp.Items[e.Pos]
			e.Item.Data, e.Item.DataOff, e.Item.DataLen = old.Data, old.DataOff, old.DataLen
		}
		cp.Items[e.Pos] = e.Item
		cp.CheckpointVersion = e.V
		cp.UpdatedAt = e.UpdatedAt
		cp.NextAgent = max(cp.NextAgent, e.NextAgent)
		return nil
	})
}

// walkJournal calls fn with each entry of the journal in r that is newer
// than base (its version above it), with its line and the line's offset.
// Every write bumps the version by one, so those entries are contiguous:
// at a gap it returns errJournalGap when strict, else it stops there. A
// torn last line (no newline: a crash during its write) or a foreign one
// ends the walk as the end of the journal. fn's error ends it too.
func walkJournal(r io.Reader, base int, strict bool, fn func(e *journalEntry, line []byte, at int64) error) error {
	br := bufio.NewReaderSize(r, 64<<10)
	last := base
	var off int64
	for {
		line, err := br.ReadBytes('\n')
		if errors.Is(err, io.EOF) {
			return nil // a line without its newline is torn
		}
		if err != nil {
			return err
		}
		at := off
		off += int64(len(line))
		var e journalEntry
		if json.Unmarshal(line, &e) != nil || e.Item == nil {
			return nil // torn or foreign: stop at the last good entry
		}
		if e.V <= base {
			continue
		}
		if e.V > last+1 {
			if strict {
				return errJournalGap
			}
			return nil
		}
		last = e.V
		if err := fn(&e, line, at); err != nil {
			return err
		}
	}
}

// LoadSummary reads a job's checkpoint without its items: every job-level
// field, with ItemCounts set to the current item counts and Items nil. It
// reads checkpoint.json up to its items and the last entry of the
// journal, so its cost does not grow with the job. A checkpoint written by
// an older version (no counts) is read whole (LoadCheckpoint).
func LoadSummary(p Paths) (*Checkpoint, error) {
	for try := 0; try < 5; try++ {
		cp, err := readHead(p.Checkpoint())
		if err != nil {
			return nil, fmt.Errorf("job %s: read checkpoint: %w", p.JobID, err)
		}
		if cp.FormatVersion < minFormat || cp.FormatVersion > CheckpointFormat {
			return nil, fmt.Errorf("job %s: checkpoint format %d is not supported (this version reads %d to %d)", p.JobID, cp.FormatVersion, minFormat, CheckpointFormat)
		}
		if cp.ItemCounts == nil {
			break
		}
		e, err := journalTail(p.CheckpointJournal(), cp.CheckpointVersion)
		if errors.Is(err, errJournalGap) {
			continue
		}
		if errors.Is(err, errNoTail) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("job %s: read checkpoint journal: %w", p.JobID, err)
		}
		if e != nil {
			cp.CheckpointVersion, cp.UpdatedAt = e.V, e.UpdatedAt
			cp.NextAgent = max(cp.NextAgent, e.NextAgent)
			cp.ItemCounts = e.Counts
		}
		return cp, nil
	}
	cp, err := LoadCheckpoint(p)
	if err != nil {
		return nil, err
	}
	n := cp.Counts()
	cp.ItemCounts, cp.Items = &n, nil
	return cp, nil
}

// readHead decodes a checkpoint file's fields up to "items" (the last).
func readHead(path string) (*Checkpoint, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	cp, _, err := decodeHead(json.NewDecoder(bufio.NewReaderSize(f, 64<<10)), path)
	return cp, err
}

// decodeHead decodes a checkpoint's fields from dec up to "items" (the
// last), reporting whether it stopped at that key (the decoder is then
// at the items' value).
func decodeHead(dec *json.Decoder, path string) (*Checkpoint, bool, error) {
	atItems := false
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, false, fmt.Errorf("decode %s: not a JSON object", path)
	}
	fields := map[string]json.RawMessage{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, false, fmt.Errorf("decode %s: %w", path, err)
		}
		key, _ := t.(string)
		if key == "items" {
			atItems = true
			break
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, false, fmt.Errorf("decode %s: %w", path, err)
		}
		fields[key] = v
	}
	b, err := json.Marshal(fields)
	if err != nil {
		return nil, false, err
	}
	var cp Checkpoint
	if err := json.Unmarshal(b, &cp); err != nil {
		return nil, false, fmt.Errorf("decode %s: %w", path, err)
	}
	return &cp, atItems, nil
}

// errNoTail: the journal's last entry cannot be found cheaply (a very
// long last line, or entries of an older version without counts).
var errNoTail = errors.New("no summary at the end of the journal")

// tailWindow is how much of the journal's end journalTail reads.
const tailWindow = 256 << 10

// journalTail returns the journal's last complete entry newer than base
// (nil if none). Lines are only ever torn at the end (a crash during an
// append; the next write after a failed append is a snapshot, which empties
// the journal), so the last complete line is the newest state. The first
// entry must continue the snapshot (errJournalGap otherwise: the journal
// was compacted after the snapshot was read).
func journalTail(path string, base int) (*journalEntry, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	size := st.Size()
	if size == 0 {
		return nil, nil
	}
	first, err := bufio.NewReaderSize(f, 64<<10).ReadBytes('\n')
	if errors.Is(err, io.EOF) {
		return nil, nil // one torn line
	}
	if err != nil {
		return nil, err
	}
	var e0 journalEntry
	if json.Unmarshal(first, &e0) != nil || e0.Item == nil {
		return nil, nil // torn or foreign: LoadCheckpoint stops there too
	}
	if e0.V > base+1 {
		return nil, errJournalGap
	}
	off := max(0, size-tailWindow)
	buf := make([]byte, size-off)
	if _, err := f.ReadAt(buf, off); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	end := bytes.LastIndexByte(buf, '\n')
	for end >= 0 {
		start := bytes.LastIndexByte(buf[:end], '\n') + 1
		if start == 0 && off > 0 {
			return nil, errNoTail // the line may begin before the window
		}
		var e journalEntry
		if json.Unmarshal(buf[start:end], &e) == nil && e.Item != nil {
			if e.Counts == nil {
				return nil, errNoTail
			}
			if e.V <= base {
				return nil, nil
			}
			return &e, nil
		}
		end = start - 1
	}
	return nil, nil
}
