package dlq

import (
	"testing"
	"time"
)

// A writer that repeats itself after a crash adds each attempt once: the
// attempts the stored record has are dropped, a repeat of all of them
// changes nothing, and a new attempt is appended.
func TestAddOnceKeepsEveryAttemptOnce(t *testing.T) {
	s := openTest(t, t.TempDir(), Options{})
	at := func(m int) time.Time { return base.Add(time.Duration(m) * time.Minute) }
	rec := func(attempts ...int) DeadLetteredItem {
		var fs []Failure
		for _, a := range attempts {
			fs = append(fs, Failure{Attempt: a, At: at(a), Message: "exit 2"})
		}
		return *FromAgentResult(AgentResult{ItemID: "i1", Status: StatusFailed, Failures: fs})
	}
	stored, added, err := s.AddOnce(rec(1, 2))
	if err != nil || !added || stored.FailureCount != 2 {
		t.Fatalf("first = %+v, %v, %v", stored.FailureCount, added, err)
	}
	stored, added, err = s.AddOnce(rec(1, 2))
	if err != nil || added || stored.FailureCount != 2 {
		t.Fatalf("repeat = count %d, added %v, %v; want unchanged", stored.FailureCount, added, err)
	}
	stored, added, err = s.AddOnce(rec(1, 2, 3))
	if err != nil || !added || stored.FailureCount != 3 {
		t.Fatalf("with a new attempt = count %d, added %v, %v", stored.FailureCount, added, err)
	}
	var nums []uint32
	for _, f := range stored.FailureHistory {
		nums = append(nums, f.AttemptNumber)
	}
	if len(nums) != 3 || nums[0] != 1 || nums[1] != 2 || nums[2] != 3 || !stored.FirstAttempt.Equal(at(1)) {
		t.Fatalf("history %v, first_attempt %v", nums, stored.FirstAttempt)
	}
}
