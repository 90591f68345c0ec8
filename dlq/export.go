package dlq

import (
	"bufio"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"time"
)

// ExportJSON writes every record of src to w as one JSON array (each
// record indented like its item file), streaming one record at a time, and
// returns the number written.
func ExportJSON(w io.Writer, src Source) (int, error) {
	bw := bufio.NewWriter(w)
	n := 0
	if _, err := bw.WriteString("["); err != nil {
		return 0, err
	}
	err := src.Each(func(d DeadLetteredItem) error {
		b, err := json.MarshalIndent(normalize(d), "  ", "  ")
		if err != nil {
			return fmt.Errorf("encode %q: %w", d.ItemID, err)
		}
		sep := ",\n  "
		if n == 0 {
			sep = "\n  "
		}
		n++
		if _, err := bw.WriteString(sep); err != nil {
			return err
		}
		_, err = bw.Write(b)
		return err
	})
	if err != nil {
		return n, fmt.Errorf("export dlq as json: %w", err)
	}
	end := "]\n"
	if n > 0 {
		end = "\n]\n"
	}
	if _, err := bw.WriteString(end); err != nil {
		return n, err
	}
	return n, bw.Flush()
}

// CSVHeader is the header row of ExportCSV. The error columns describe the
// newest failure; exit_code is empty unless error_type is CommandFailed;
// item_data is compact JSON; timestamps are RFC 3339 (UTC).
var CSVHeader = []string{"item_id", "label", "error_type", "exit_code", "failure_count", "first_attempt", "last_attempt",
	"error_signature", "error_message", "reprocess_eligible", "manual_review_required", "agent_id",
	"step_failed", "json_log_location", "worktree_path", "branch_name", "item_data"}

// ExportCSV writes one CSV row per record of src (RFC 4180 quoting via
// encoding/csv), after CSVHeader, and returns the number of records. The
// label column holds the item id; ExportCSVLabeled names items otherwise.
func ExportCSV(w io.Writer, src Source) (int, error) { return ExportCSVLabeled(w, src, nil) }

// ExportCSVLabeled is ExportCSV with label naming each record's item in
// the label column (nil: the item id).
func ExportCSVLabeled(w io.Writer, src Source, label func(DeadLetteredItem) string) (int, error) {
	cw := csv.NewWriter(w)
	if err := cw.Write(CSVHeader); err != nil {
		return 0, err
	}
	n := 0
	err := src.Each(func(d DeadLetteredItem) error {
		n++
		l := d.ItemID
		if label != nil {
			l = label(d)
		}
		row := csvRow(d)
		row = append(row[:1], append([]string{l}, row[1:]...)...)
		return cw.Write(row)
	})
	cw.Flush()
	if err == nil {
		err = cw.Error()
	}
	if err != nil {
		return n, fmt.Errorf("export dlq as csv: %w", err)
	}
	return n, nil
}

func csvRow(d DeadLetteredItem) []string {
	f, _ := d.LastFailure()
	t := d.LastErrorType()
	exit := ""
	if t.Kind == CommandFailed {
		exit = strconv.Itoa(t.ExitCode)
	}
	var wt, br string
	if d.WorktreeArtifacts != nil {
		wt, br = d.WorktreeArtifacts.WorktreePath, d.WorktreeArtifacts.BranchName
	}
	data := "null"
	if len(d.ItemData) > 0 {
		if b, err := json.Marshal(d.ItemData); err == nil {
			data = string(b)
		}
	}
	return []string{d.ItemID, t.String(), exit, strconv.FormatUint(uint64(d.FailureCount), 10),
		stamp(d.FirstAttempt), stamp(d.LastAttempt), d.ErrorSignature, f.ErrorMessage,
		strconv.FormatBool(d.ReprocessEligible), strconv.FormatBool(d.ManualReviewRequired), f.AgentID,
		f.StepFailed, deref(f.JSONLogLocation), wt, br, data}
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
