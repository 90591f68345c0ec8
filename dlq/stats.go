package dlq

import (
	"fmt"
	"time"
)

// Statistics summarises a DLQ (`dlq stats`). The first six keys are the
// seed's; by_error_type and average_failure_count are ours.
type Statistics struct {
	TotalItems            int `json:"total_items"`
	EligibleForReprocess  int `json:"eligible_for_reprocess"`
	RequiringManualReview int `json:"requiring_manual_review"`
	// OldestItem is the earliest first_attempt; null when empty.
	OldestItem *time.Time `json:"oldest_item"`
	// NewestItem is the latest last_attempt; null when empty.
	NewestItem *time.Time `json:"newest_item"`
	// ErrorCategories counts records per error_signature.
	ErrorCategories map[string]int `json:"error_categories"`
	// ByErrorType counts records per error type of their newest failure
	// (so it sums to TotalItems; Analyze's error_distribution counts every
	// failure instead).
	ByErrorType map[string]int `json:"by_error_type"`
	// AverageFailureCount is the mean failure_count (0 when empty).
	AverageFailureCount float64 `json:"average_failure_count"`
}

// Stats streams src once and returns its Statistics.
func Stats(src Source) (Statistics, error) {
	st := Statistics{ErrorCategories: map[string]int{}, ByErrorType: map[string]int{}}
	var failures uint64
	var oldest, newest time.Time
	err := src.Each(func(d DeadLetteredItem) error {
		st.TotalItems++
		if d.ReprocessEligible {
			st.EligibleForReprocess++
		}
		if d.ManualReviewRequired {
			st.RequiringManualReview++
		}
		st.ErrorCategories[d.ErrorSignature]++
		st.ByErrorType[d.LastErrorType().String()]++
		failures += uint64(d.FailureCount)
		if oldest.IsZero() || d.FirstAttempt.Before(oldest) {
			oldest = d.FirstAttempt
		}
		if newest.IsZero() || d.LastAttempt.After(newest) {
			newest = d.LastAttempt
		}
		return nil
	})
	if err != nil {
		return Statistics{}, fmt.Errorf("dlq stats: %w", err)
	}
	if st.TotalItems > 0 {
		o, n := oldest.UTC(), newest.UTC()
		st.OldestItem, st.NewestItem = &o, &n
		st.AverageFailureCount = float64(failures) / float64(st.TotalItems)
	}
	return st, nil
}
