package dlq

import (
	"fmt"
	"slices"
	"strings"
)

// CanaryPlan is how a `dlq retry --signature SIG [--sample N]` redrive
// splits one failure cluster: Sample runs first; Rest runs only when not
// every sampled item fails again with Signature. Both are sorted by item
// id, so the choice is deterministic.
type CanaryPlan struct {
	Signature string   `json:"signature"`
	Sample    []string `json:"sample"`
	Rest      []string `json:"rest"`
	// Stopped is set when every sampled item failed again with Signature,
	// so Rest was not run.
	Stopped bool `json:"stopped,omitempty"`
}

// PlanCanary splits the records of job jobID's store s that have error
// signature sig (reprocess-eligible ones only, unless force) into the
// sample (the first sample by item id) and the rest. When no record is
// selected the plan is empty and why says so for a person: there are no
// records, the signature's are all ineligible (add --force), or it matches
// none; followed by every signature of the job with its eligible/total
// counts.
func PlanCanary(s *Store, jobID, sig string, sample int, force bool) (plan *CanaryPlan, why string, err error) {
	var ids []string
	type counts struct{ eligible, total int }
	known := map[string]*counts{}
	err = s.Each(func(r DeadLetteredItem) error {
		c := known[r.ErrorSignature]
		if c == nil {
			c = &counts{}
			known[r.ErrorSignature] = c
		}
		c.total++
		if r.ReprocessEligible {
			c.eligible++
		}
		if r.ErrorSignature == sig && (force || r.ReprocessEligible) {
			ids = append(ids, r.ItemID)
		}
		return nil
	})
	if err != nil {
		return nil, "", err
	}
	if len(ids) > 0 {
		slices.Sort(ids)
		n := min(max(sample, 0), len(ids))
		return &CanaryPlan{Signature: sig, Sample: ids[:n], Rest: ids[n:]}, "", nil
	}
	switch c := known[sig]; {
	case len(known) == 0:
		why = fmt.Sprintf("--signature %q: job %s has no DLQ records", sig, jobID)
	case c != nil:
		why = fmt.Sprintf("--signature %q matches %d DLQ record(s) of job %s, none of them reprocess_eligible (manual review): add --force to retry them", sig, c.total, jobID)
	default:
		why = fmt.Sprintf("--signature %q matches no DLQ record of job %s", sig, jobID)
	}
	sigs := make([]string, 0, len(known))
	for s, c := range known {
		sigs = append(sigs, fmt.Sprintf("  %q %d/%d", s, c.eligible, c.total))
	}
	slices.Sort(sigs)
	if len(sigs) > 0 {
		why += "; the job's signatures (eligible/total; --force includes the ineligible):\n" + strings.Join(sigs, "\n")
	}
	return &CanaryPlan{Signature: sig, Sample: []string{}, Rest: []string{}}, why, nil
}

// CountSignature counts the items of ids that s holds with signature sig:
// after a canary's sample ran, how many failed again the same way.
func CountSignature(s *Store, sig string, ids []string) (int, error) {
	n := 0
	err := s.Each(func(r DeadLetteredItem) error {
		if r.ErrorSignature == sig && slices.Contains(ids, r.ItemID) {
			n++
		}
		return nil
	})
	return n, err
}
