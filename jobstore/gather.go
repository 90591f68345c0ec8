package jobstore

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
)

// GatherState is what a sharded job's gatherer keeps besides the
// checkpoint: which plan it gathers (outputs of any other plan are
// refused) and which shards are closed (gathered, or declared missing by a
// final gather): a closed shard's output is never merged again, so the
// results do not depend on when outputs arrive.
type GatherState struct {
	// PlanID is the plan being gathered.
	PlanID string `json:"plan_id"`
	// Closed maps a shard index to why it is closed ("gathered",
	// "missing", "incomplete: N pending").
	Closed map[int]string `json:"closed"`
	// Rejected maps an item id to the reason a reviewer rejected it
	// (gather --reject): those items are not merged; they go to the DLQ.
	// Kept so a gather run again after a crash rejects the same items.
	Rejected map[string]string `json:"rejected,omitempty"`
}

// GatherStateFile is the gatherer's state of a sharded job.
func (p Paths) GatherStateFile() string { return filepath.Join(p.JobStateDir(), "gather.json") }

// LoadGatherState reads the gatherer's state; ok is false when there is
// none.
func LoadGatherState(p Paths) (gs *GatherState, ok bool, err error) {
	gs = &GatherState{}
	if err := readJSON(p.GatherStateFile(), gs); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return &GatherState{Closed: map[int]string{}}, false, nil
		}
		return nil, false, err
	}
	if gs.Closed == nil {
		gs.Closed = map[int]string{}
	}
	return gs, true, nil
}

// SaveGatherState writes the gatherer's state atomically.
func SaveGatherState(p Paths, gs *GatherState) error { return writeJSON(p.GatherStateFile(), gs) }

// planningMarker marks a job's state as a `plan`'s: the planning job is
// removed when the plan is written, so state with this marker is a plan
// that was killed, which planning again may discard.
func (p Paths) planningMarker() string { return filepath.Join(p.JobStateDir(), "planning") }

// MarkPlanning marks the job's state as a plan's (before its checkpoint
// is written).
func MarkPlanning(p Paths) error { return writeFile(p.planningMarker(), nil) }

// IsPlanning reports whether the job's state is marked as a plan's.
func IsPlanning(p Paths) bool {
	_, err := os.Stat(p.planningMarker())
	return err == nil
}
