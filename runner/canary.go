package runner

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/prodigy-action/prodigy-action/dlq"
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

// retryCluster runs RetryDLQ restricted to one error_signature cluster
// (ro.Signature), canary first when ro.Sample > 0: the first Sample
// records by item id run, and if all of them fail again with the same
// signature the rest of the cluster is not run and the error (exit 1)
// names the signature and the sampled items. Otherwise the rest of the
// cluster is redriven. A signature with no record to run (none, or none
// reprocess_eligible without Force) runs nothing and exits 0, like a
// --filter that matches nothing; stderr says why, lists every signature
// with its eligible/total counts and, when its records are only
// ineligible, says to add --force. With DryRun the plan is returned in Result.Canary and
// nothing changes.
func retryCluster(ctx context.Context, ro retryOptions) (*Result, error) {
	if ro.Sample < 0 {
		return nil, usage(fmt.Errorf("--sample must be positive"))
	}
	plan, err := planCanary(ro)
	if err != nil {
		return nil, err
	}
	// Each step is a plain redrive of explicit items.
	run := func(ids []string, skipReduce bool) (*Result, error) {
		r := ro
		r.Signature, r.Sample, r.SkipReduce = "", 0, skipReduce
		r.Items = map[string]bool{}
		for _, id := range ids {
			r.Items[id] = true
		}
		return retryDLQ(ctx, r)
	}
	if ro.DryRun {
		res, err := run(append(slices.Clone(plan.Sample), plan.Rest...), false)
		if res != nil {
			res.Canary = plan
		}
		return res, err
	}
	if len(plan.Rest) == 0 || len(plan.Sample) == 0 {
		// --signature alone, or a sample covering the whole cluster.
		res, err := run(append(slices.Clone(plan.Sample), plan.Rest...), false)
		if res != nil {
			res.Canary = plan
		}
		return res, err
	}
	// The sample runs without reduce: reduce runs once, after the rest
	// (and not at all when the canary stops the redrive).
	res, err := run(plan.Sample, true)
	if err != nil {
		return res, err
	}
	still, err := sameSignature(ro, plan.Signature, plan.Sample)
	if err != nil {
		return res, err
	}
	if still == len(plan.Sample) {
		plan.Stopped = true
		res.Canary = plan
		return res, fmt.Errorf("%w: canary: all %d sampled item(s) (%s) of signature %q failed again with the same signature; "+
			"the other %d item(s) of the cluster were not run (fix the cause, then run again; --signature without --sample redrives the whole cluster)",
			ErrJobFailed, len(plan.Sample), strings.Join(plan.Sample, ", "), plan.Signature, len(plan.Rest))
	}
	res, err = run(plan.Rest, false)
	if res != nil {
		res.Canary = plan
	}
	return res, err
}

// planCanary reads the job's DLQ and splits the records with
// ro.Signature (reprocess-eligible only unless ro.Force) into the sample
// (the first ro.Sample by item id) and the rest.
func planCanary(ro retryOptions) (*CanaryPlan, error) {
	p, err := findJob(ro.Home, "", ro.JobID)
	if err != nil {
		return nil, err
	}
	store, err := openDLQ(p, dlq.Options{})
	if err != nil {
		return nil, err
	}
	defer store.Close() // read only: nothing to flush
	var ids []string
	type counts struct{ eligible, total int }
	known := map[string]*counts{}
	err = store.Each(func(r dlq.DeadLetteredItem) error {
		c := known[r.ErrorSignature]
		if c == nil {
			c = &counts{}
			known[r.ErrorSignature] = c
		}
		c.total++
		if r.ReprocessEligible {
			c.eligible++
		}
		if r.ErrorSignature == ro.Signature && (ro.Force || r.ReprocessEligible) {
			ids = append(ids, r.ItemID)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(ids) == 0 {
		// Nothing to run is an empty selection, as for a --filter that
		// matches nothing (exit 0): say why and list every signature.
		var why string
		switch c := known[ro.Signature]; {
		case len(known) == 0:
			why = fmt.Sprintf("--signature %q: job %s has no DLQ records", ro.Signature, ro.JobID)
		case c != nil:
			why = fmt.Sprintf("--signature %q matches %d DLQ record(s) of job %s, none of them reprocess_eligible (manual review): add --force to retry them", ro.Signature, c.total, ro.JobID)
		default:
			why = fmt.Sprintf("--signature %q matches no DLQ record of job %s", ro.Signature, ro.JobID)
		}
		sigs := make([]string, 0, len(known))
		for s, c := range known {
			sigs = append(sigs, fmt.Sprintf("  %q %d/%d", s, c.eligible, c.total))
		}
		slices.Sort(sigs)
		if len(sigs) > 0 {
			why += "; the job's signatures (eligible/total; --force includes the ineligible):\n" + strings.Join(sigs, "\n")
		}
		if ro.Run.Stderr != nil {
			fmt.Fprintf(ro.Run.Stderr, "no records to retry: %s\n", why)
		}
		return &CanaryPlan{Signature: ro.Signature, Sample: []string{}, Rest: []string{}}, nil
	}
	slices.Sort(ids)
	n := min(ro.Sample, len(ids))
	return &CanaryPlan{Signature: ro.Signature, Sample: ids[:n], Rest: ids[n:]}, nil
}

// sameSignature counts the items of ids that are still in the DLQ with
// signature sig.
func sameSignature(ro retryOptions, sig string, ids []string) (int, error) {
	p, err := findJob(ro.Home, "", ro.JobID)
	if err != nil {
		return 0, err
	}
	store, err := openDLQ(p, dlq.Options{})
	if err != nil {
		return 0, err
	}
	defer store.Close() // read only: nothing to flush
	n := 0
	err = store.Each(func(r dlq.DeadLetteredItem) error {
		if r.ErrorSignature == sig && slices.Contains(ids, r.ItemID) {
			n++
		}
		return nil
	})
	return n, err
}
