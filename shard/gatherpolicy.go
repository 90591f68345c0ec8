package shard

import (
	"fmt"

	"github.com/prodigy-action/prodigy-action/config"
	"github.com/prodigy-action/prodigy-action/jobstore"
)

// jobWideStop applies the workflow's failure policy ep to the gathered job
// as a whole (its item counts c), as a single runner applies it after each
// finished item: every shard applied it to its own items only (with its
// part of max_failures), so a job whose shards each stayed within
// failure_threshold can exceed it together. It returns why the job stops
// before reduce, or "".
func jobWideStop(ep config.ErrorPolicy, c jobstore.Counts) string {
	return failurePolicyStop(ep, c.Merged+c.Skipped+c.DLQ, c.Skipped+c.DLQ)
}

// failurePolicyStop is the rule the engine applies after each finished
// item, over finished and failed item counts: why the policy stops a job
// with those counts, or "".
func failurePolicyStop(ep config.ErrorPolicy, finished, failed int) string {
	switch {
	case failed == 0:
		return ""
	case ep.OnItemFailure == config.OnFailureStop:
		return fmt.Sprintf("on_item_failure: stop (%d item(s) failed)", failed)
	case !ep.ContinueOnFailure:
		return fmt.Sprintf("continue_on_failure: false (%d item(s) failed)", failed)
	case ep.MaxFailures > 0 && failed >= ep.MaxFailures:
		return fmt.Sprintf("max_failures (%d) reached (%d item(s) failed)", ep.MaxFailures, failed)
	case ep.FailureThreshold > 0 && finished >= 10 && float64(failed)/float64(finished) > ep.FailureThreshold:
		return fmt.Sprintf("failure rate %.0f%% (%d of %d) exceeds failure_threshold %.0f%%",
			100*float64(failed)/float64(finished), failed, finished, 100*ep.FailureThreshold)
	}
	return ""
}
