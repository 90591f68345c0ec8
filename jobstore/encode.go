package jobstore

import (
	"encoding/json"
	"math"
	"strconv"
)

// appendItem appends it as JSON to b, with the redactor (if any) applied
// to its free-text strings, and returns the result. The common item (no
// tokens, failures, pending record or inline data; plain ASCII strings) is
// encoded by hand, to the bytes json.Marshal gives, because a snapshot
// encodes every item of the job; any other item goes through json.Marshal
// and the redactor as a whole. Every field of CheckpointItem is written
// (TestAppendItemWritesEveryField): a field left out here is lost by the
// next snapshot, as the in-flight attempt, the lost attempts and the
// spend ceiling once were.
func (s *State) appendItem(b []byte, it *CheckpointItem) ([]byte, error) {
	if it.Tokens != nil || it.Failures != nil || it.PendingRecord != nil || it.Data != nil ||
		!plainString(it.ItemID) || !plainString(it.Label) || !plainString(string(it.State)) ||
		!plainString(it.Error) || !plainString(it.ErrorType) || !plainString(it.LogLocation) || !plainString(it.MergeCommit) ||
		!plainString(it.InFlightAgent) || !finite(it.SpendCeiling) ||
		!finite(it.CostUSD) || !finite(it.CostBase) || (it.TimingsMS != nil && !finiteTimings(it.TimingsMS)) {
		line, err := json.Marshal(it)
		if err != nil {
			return b, err
		}
		return append(b, s.redactJSON(line)...), nil
	}
	b = append(b, `{"item_id":`...)
	b = s.appendText(b, it.ItemID)
	if it.Label != "" {
		b = append(b, `,"label":`...)
		b = s.appendText(b, it.Label)
	}
	b = append(b, `,"state":"`...)
	b = append(b, it.State...)
	b = append(b, `","attempts":`...)
	b = strconv.AppendInt(b, int64(it.Attempts), 10)
	if it.Error != "" {
		b = append(b, `,"error":`...)
		b = s.appendText(b, it.Error)
	}
	if it.ErrorType != "" {
		b = append(b, `,"error_type":`...)
		b = s.appendText(b, it.ErrorType)
	}
	b = append(b, `,"commits":`...)
	b = strconv.AppendInt(b, int64(it.Commits), 10)
	b = append(b, `,"duration_ms":`...)
	b = strconv.AppendInt(b, it.DurationMS, 10)
	if it.LogLocation != "" {
		b = append(b, `,"log_location":`...)
		b = s.appendText(b, it.LogLocation)
	}
	if t := it.TimingsMS; t != nil {
		b = append(b, `,"timings_ms":{"prepare":`...)
		b = appendFloat(b, t.Prepare)
		b = append(b, `,"steps":`...)
		b = appendFloat(b, t.Steps)
		b = append(b, `,"merge":`...)
		b = appendFloat(b, t.Merge)
		b = append(b, `,"cleanup":`...)
		b = appendFloat(b, t.Cleanup)
		b = append(b, `,"bookkeeping":`...)
		b = appendFloat(b, t.Bookkeeping)
		b = append(b, '}')
	}
	b = append(b, `,"cost_usd":`...)
	b = appendFloat(b, it.CostUSD)
	b = append(b, `,"index":`...)
	b = strconv.AppendInt(b, int64(it.Index), 10)
	if it.DataOff != 0 {
		b = append(b, `,"data_off":`...)
		b = strconv.AppendInt(b, it.DataOff, 10)
	}
	if it.DataLen != 0 {
		b = append(b, `,"data_len":`...)
		b = strconv.AppendInt(b, int64(it.DataLen), 10)
	}
	if it.BudgetBase != 0 {
		b = append(b, `,"budget_base":`...)
		b = strconv.AppendInt(b, int64(it.BudgetBase), 10)
	}
	if it.CostBase != 0 {
		b = append(b, `,"cost_base":`...)
		b = appendFloat(b, it.CostBase)
	}
	if it.InFlight != 0 {
		b = append(b, `,"attempt_in_flight":`...)
		b = strconv.AppendInt(b, int64(it.InFlight), 10)
	}
	if it.InFlightAgent != "" {
		b = append(b, `,"agent_in_flight":`...)
		b = s.appendText(b, it.InFlightAgent)
	}
	if it.InFlightSince != nil {
		t, err := it.InFlightSince.MarshalJSON()
		if err != nil {
			return b, err
		}
		b = append(b, `,"attempt_in_flight_since":`...)
		b = append(b, t...)
	}
	if it.Lost != 0 {
		b = append(b, `,"attempts_lost":`...)
		b = strconv.AppendInt(b, int64(it.Lost), 10)
	}
	if it.SpendCeiling != 0 {
		b = append(b, `,"spend_ceiling_usd":`...)
		b = appendFloat(b, it.SpendCeiling)
	}
	if it.MergeCommit != "" {
		b = append(b, `,"merge_commit":`...)
		b = s.appendText(b, it.MergeCommit)
	}
	return append(b, '}'), nil
}

// appendText appends the JSON string of a plain string, redacted.
func (s *State) appendText(b []byte, v string) []byte {
	n := len(b)
	b = append(append(append(b, '"'), v...), '"')
	if s.redact == nil {
		return b
	}
	red := s.redact(b[n:])
	if string(red) == string(b[n:]) {
		return b
	}
	return append(b[:n], red...)
}

// plainString: v needs no escaping in JSON (printable ASCII without
// '"', '\\' and the characters json.Marshal escapes for HTML).
func plainString(v string) bool {
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}

func finite(f float64) bool { return !math.IsInf(f, 0) && !math.IsNaN(f) }

func finiteTimings(t *Timings) bool {
	return finite(t.Prepare) && finite(t.Steps) && finite(t.Merge) && finite(t.Cleanup) && finite(t.Bookkeeping)
}

// appendFloat formats f as encoding/json does.
func appendFloat(b []byte, f float64) []byte {
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}
