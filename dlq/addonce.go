package dlq

import "errors"

// AddOnce is Add for a writer that may be repeating itself (a crash
// between its DLQ write and its own record of it): failure_history entries
// whose attempt number the stored record already has are dropped, so
// every attempt appears once. added is false, and the stored record is
// returned unchanged, when nothing was new.
func (s *Store) AddOnce(rec DeadLetteredItem) (stored DeadLetteredItem, added bool, err error) {
	old, err := s.Get(rec.ItemID)
	switch {
	case err == nil:
		var last uint32
		for _, f := range old.FailureHistory {
			last = max(last, f.AttemptNumber)
		}
		keep := rec.FailureHistory[:0:0]
		for _, f := range rec.FailureHistory {
			if f.AttemptNumber > last {
				keep = append(keep, f)
			}
		}
		if len(keep) == 0 {
			return *old, false, nil
		}
		rec.FailureHistory = keep
		rec.FailureCount = uint32(len(keep))
		rec.FirstAttempt = keep[0].Timestamp
	case errors.Is(err, ErrNotFound):
	default:
		return DeadLetteredItem{}, false, err
	}
	stored, err = s.Add(rec)
	if err != nil {
		return DeadLetteredItem{}, false, err
	}
	return stored, true, nil
}
