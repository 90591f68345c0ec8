package jobstore

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// AttemptLog is where attempt n (1-based) of item itemID keeps its output:
// every step's stdout and stderr (shell and Claude), redacted, in the
// item's logs directory (Logs). `prodigy-action logs JOB ITEM` prints it.
func (p Paths) AttemptLog(itemID string, n int) string {
	return filepath.Join(p.Logs(itemID), fmt.Sprintf("attempt-%d.log", n))
}

// AttemptTranscript is where attempt n of item itemID keeps the
// stream-json transcript of its claude steps, beside AttemptLog (its
// path is a DLQ record's json_log_location). Setup and reduce keep theirs
// as the items "_setup" and "_reduce".
func (p Paths) AttemptTranscript(itemID string, n int) string {
	return filepath.Join(p.Logs(itemID), fmt.Sprintf("attempt-%d.jsonl", n))
}

// ErrNoLogs is wrapped by ItemLogs's error for an item that kept no
// output (test with errors.Is).
var ErrNoLogs = errors.New("no item output kept")

// AttemptLogs is what is kept of one attempt of an item: its output log
// (AttemptLog) and, for claude steps, the stream-json transcript
// (AttemptTranscript); "" when absent.
type AttemptLogs struct {
	Attempt    int    `json:"attempt"`
	Log        string `json:"log,omitempty"`
	Transcript string `json:"transcript,omitempty"`
}

// ItemLogs lists the kept attempts of item itemID of job p, by attempt
// number. An item without any is an error wrapping ErrNoLogs whose text
// names (some of) the items that have logs.
func ItemLogs(p Paths, itemID string) ([]AttemptLogs, error) {
	dir := p.Logs(itemID)
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) == 0 {
		var names []string
		if all, err := os.ReadDir(p.LogsDir()); err == nil {
			for _, e := range all {
				if len(names) == 20 {
					names = append(names, "…")
					break
				}
				names = append(names, e.Name())
			}
		}
		if len(names) == 0 {
			return nil, lookupErrorf(ErrNoLogs, "job %s kept no item output (no attempt has run)", p.JobID)
		}
		return nil, lookupErrorf(ErrNoLogs, "job %s kept no output for item %q; items with output: %s", p.JobID, itemID, strings.Join(names, ", "))
	}
	byN := map[int]*AttemptLogs{}
	for _, e := range entries {
		var n int
		var ext string
		name := e.Name()
		if _, err := fmt.Sscanf(name, "attempt-%d.%s", &n, &ext); err != nil || n <= 0 {
			continue
		}
		a := byN[n]
		if a == nil {
			a = &AttemptLogs{Attempt: n}
			byN[n] = a
		}
		switch ext { // the names of AttemptLog and AttemptTranscript
		case "log":
			a.Log = filepath.Join(dir, name)
		case "jsonl":
			a.Transcript = filepath.Join(dir, name)
		}
	}
	out := make([]AttemptLogs, 0, len(byN))
	for _, a := range byN {
		out = append(out, *a)
	}
	sort.Slice(out, func(i, k int) bool { return out[i].Attempt < out[k].Attempt })
	return out, nil
}
