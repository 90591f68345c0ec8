package dlq

import "encoding/json"

// FilterFields are the record's own names a redrive's `--filter` sees as
// item.* (FilterEnv): with the item_data fields of the records, the names
// a filter may read. error_type and error_message are the last attempt's.
var FilterFields = []string{"item_data", "item_id", "failure_count", "error_signature", "reprocess_eligible",
	"manual_review_required", "first_attempt", "last_attempt", "error_type", "error_message"}

// FilterEnv is what a redrive's `--filter` sees of r as item.*: the
// item_data fields and the record's own fields, FilterFields (the record
// wins on a name clash; error_type and error_message only when r has a
// failure history).
func FilterEnv(r DeadLetteredItem) map[string]any {
	env := map[string]any{}
	var data any
	if json.Unmarshal(r.ItemData, &data) == nil {
		if m, ok := data.(map[string]any); ok {
			for k, v := range m {
				env[k] = v
			}
		}
	}
	env["item_data"] = data
	env["item_id"] = r.ItemID
	env["failure_count"] = float64(r.FailureCount)
	env["error_signature"] = r.ErrorSignature
	env["reprocess_eligible"] = r.ReprocessEligible
	env["manual_review_required"] = r.ManualReviewRequired
	env["first_attempt"] = r.FirstAttempt
	env["last_attempt"] = r.LastAttempt
	if n := len(r.FailureHistory); n > 0 {
		last := r.FailureHistory[n-1]
		env["error_type"] = last.ErrorType.String()
		env["error_message"] = last.ErrorMessage
	}
	return env
}
