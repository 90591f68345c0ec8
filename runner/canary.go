package runner

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/prodigy-action/prodigy-action/dlq"
)

// CanaryPlan is how a canary redrive splits one failure cluster
// (dlq.PlanCanary).
type CanaryPlan = dlq.CanaryPlan

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
// (the first ro.Sample by item id) and the rest; an empty selection is
// said on stderr (dlq.PlanCanary).
func planCanary(ro retryOptions) (*CanaryPlan, error) {
	store, err := openJobDLQ(ro)
	if err != nil {
		return nil, err
	}
	defer store.Close() // read only: nothing to flush
	plan, why, err := dlq.PlanCanary(store, ro.JobID, ro.Signature, ro.Sample, ro.Force)
	if why != "" && ro.Run.Stderr != nil {
		fmt.Fprintf(ro.Run.Stderr, "no records to retry: %s\n", why)
	}
	return plan, err
}

// sameSignature counts the items of ids that are still in the DLQ with
// signature sig.
func sameSignature(ro retryOptions, sig string, ids []string) (int, error) {
	store, err := openJobDLQ(ro)
	if err != nil {
		return 0, err
	}
	defer store.Close() // read only: nothing to flush
	return dlq.CountSignature(store, sig, ids)
}

// openJobDLQ opens the DLQ of ro's job to read it.
func openJobDLQ(ro retryOptions) (*dlq.Store, error) {
	p, err := findJob(ro.Home, "", ro.JobID)
	if err != nil {
		return nil, err
	}
	return openDLQ(p, dlq.Options{})
}
