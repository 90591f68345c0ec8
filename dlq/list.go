package dlq

import (
	"container/heap"
	"fmt"
	"sort"
	"time"
)

// Summary is one row of `dlq list`.
type Summary struct {
	ItemID string `json:"item_id"`
	// Label names the item for humans (ListOptions.Label; the item id
	// without one). It is derived from the record, never stored in it.
	Label                string    `json:"label"`
	ErrorType            ErrorType `json:"error_type"`
	FailureCount         uint32    `json:"failure_count"`
	ReprocessEligible    bool      `json:"reprocess_eligible"`
	ManualReviewRequired bool      `json:"manual_review_required"`
	LastAttempt          time.Time `json:"last_attempt"`
	ErrorSignature       string    `json:"error_signature"`
}

// Summarize returns the list row of a record.
func Summarize(d DeadLetteredItem) Summary {
	return Summary{ItemID: d.ItemID, Label: d.ItemID, ErrorType: d.LastErrorType(), FailureCount: d.FailureCount,
		ReprocessEligible: d.ReprocessEligible, ManualReviewRequired: d.ManualReviewRequired,
		LastAttempt: d.LastAttempt.UTC(), ErrorSignature: d.ErrorSignature}
}

// ListOptions selects the rows of List.
type ListOptions struct {
	// EligibleOnly keeps records with reprocess_eligible true.
	EligibleOnly bool
	// Limit bounds the rows returned; 0 means all.
	Limit int
	// Label names a record's item in Summary.Label; nil uses the item id.
	Label func(DeadLetteredItem) string
}

// List streams src and returns the matching records, newest last_attempt
// first (ties by item id), at most o.Limit of them, plus the number that
// matched. Memory is O(Limit), not O(records).
func List(src Source, o ListOptions) ([]Summary, int, error) {
	h := &summaryHeap{}
	matched := 0
	err := src.Each(func(d DeadLetteredItem) error {
		if o.EligibleOnly && !d.ReprocessEligible {
			return nil
		}
		matched++
		s := Summarize(d)
		if o.Label != nil {
			s.Label = o.Label(d)
		}
		if o.Limit <= 0 || h.Len() < o.Limit {
			heap.Push(h, s)
		} else if newer(s, (*h)[0]) {
			(*h)[0] = s
			heap.Fix(h, 0)
		}
		return nil
	})
	if err != nil {
		return nil, 0, fmt.Errorf("dlq list: %w", err)
	}
	out := []Summary(*h)
	sort.Slice(out, func(i, j int) bool { return newer(out[i], out[j]) })
	return out, matched, nil
}

// newer orders rows as List returns them.
func newer(a, b Summary) bool {
	if !a.LastAttempt.Equal(b.LastAttempt) {
		return a.LastAttempt.After(b.LastAttempt)
	}
	return a.ItemID < b.ItemID
}

// summaryHeap keeps the last row in List order at its root.
type summaryHeap []Summary

func (h summaryHeap) Len() int           { return len(h) }
func (h summaryHeap) Less(i, j int) bool { return newer(h[j], h[i]) }
func (h summaryHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *summaryHeap) Push(x any)        { *h = append(*h, x.(Summary)) }
func (h *summaryHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
