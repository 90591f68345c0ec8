package shard

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/prodigy-action/prodigy-action/internal/brief"
	"github.com/prodigy-action/prodigy-action/jobstore"
)

// addRejections adds a review's rejections (item id → reason) to the
// gather state, before anything is gathered: every id must be an item of
// the plan, and the set is fixed by the job's first gather (fresh: no
// gather state yet), since a later gather may find a shard merged whole
// before it was killed. Giving the same ids again is fine (a gather run
// again after a crash). An empty reason becomes "rejected by the
// reviewer"; a reason given again differently keeps the first.
func addRejections(plan *Plan, gs *jobstore.GatherState, fresh bool, reject map[string]string) error {
	if len(reject) == 0 {
		return nil
	}
	shardOf := make(map[string]int, len(plan.Items))
	for _, sh := range plan.Shards {
		for _, id := range sh.Items {
			shardOf[id] = sh.Shard
		}
	}
	var errs []error
	for _, id := range slices.Sorted(maps.Keys(reject)) {
		k, ok := shardOf[id]
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("--reject %s: no such item in plan %s of job %s", strconv.Quote(id), plan.PlanID, plan.JobID))
		case !fresh && gs.Rejected[id] == "":
			errs = append(errs, fmt.Errorf("--reject %s (shard %d): job %s is already being gathered without it; rejections are given to the job's first gather (review before gathering)", strconv.Quote(id), k, plan.JobID))
		}
	}
	if len(errs) > 0 {
		return usage(errors.Join(errs...))
	}
	if gs.Rejected == nil {
		gs.Rejected = map[string]string{}
	}
	for id, why := range reject {
		if _, seen := gs.Rejected[id]; seen {
			continue
		}
		why = strings.TrimSpace(why)
		if why == "" {
			why = "rejected by the reviewer"
		}
		gs.Rejected[id] = brief.OneLine(why, 500)
	}
	return nil
}

// rejectedIn is the rejected items of shard sh that the shard merged:
// rejecting an item that failed or is pending changes nothing.
func rejectedIn(gs *jobstore.GatherState, sh PlanShard, sr *Result) map[string]string {
	if len(gs.Rejected) == 0 {
		return nil
	}
	out := map[string]string{}
	for _, it := range sr.Items {
		if why, ok := gs.Rejected[it.ItemID]; ok && it.State == jobstore.ItemMerged && slices.Contains(sh.Items, it.ItemID) {
			out[it.ItemID] = why
		}
	}
	return out
}

// ParseRejections reads ITEM_ID[=REASON] values (gather's --reject, the
// Action's reject input): item id → reason ("" when none was given). An
// empty id or an id given twice is an error.
func ParseRejections(values []string) (map[string]string, error) {
	out := map[string]string{}
	for _, v := range values {
		id, why, _ := strings.Cut(v, "=")
		id = strings.TrimSpace(id)
		if id == "" {
			return nil, fmt.Errorf("%q: want ITEM_ID[=REASON]", v)
		}
		if _, dup := out[id]; dup {
			return nil, fmt.Errorf("item %q rejected twice", id)
		}
		out[id] = strings.TrimSpace(why)
	}
	return out, nil
}
