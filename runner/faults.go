package runner

import (
	"context"
	"sync/atomic"

	"github.com/prodigy-action/prodigy-action/runner/step"
)

// Fault points: the moments of a job where a crash is most likely to break
// the bookkeeping. The runner calls the fault hook (SetFaultHook) at each;
// tests use it to kill the process at exactly that moment.
const (
	// FaultJobIntent: the job's checkpoint (its intent) is on disk; the
	// results branch and parent worktree do not exist yet.
	FaultJobIntent = "job-intent"
	// FaultJobCreated: the results branch and parent worktree exist; the
	// job has not started setup.
	FaultJobCreated = "job-created"
	// FaultItemsLoaded: a batch of the job's items is written to the
	// temporary file they reach the checkpoint from; setup (with them) is
	// not recorded done yet.
	FaultItemsLoaded = "items-loaded"
	// FaultItemMerged: an item succeeded and its merge commit (when it
	// made commits) is on the results branch; neither the checkpoint nor
	// the DLQ (a redriven item's record) knows yet.
	FaultItemMerged = "item-merged"
	// FaultBackoff: a failed attempt is persisted; the backoff sleep
	// before the next attempt is about to start.
	FaultBackoff = "backoff"
	// FaultDLQAdded: a failed item's DLQ record is written; the
	// checkpoint still holds it as pending.
	FaultDLQAdded = "dlq-added"
	// FaultReduceStepDone: a reduce step succeeded (and may have
	// committed); the checkpoint does not record it yet.
	FaultReduceStepDone = "reduce-step-done"
	// FaultAgentCommitted: an agent's steps ended and it committed in the
	// repository it was handed (gitops.HandOut); the engine has not taken
	// the worktree back yet.
	FaultAgentCommitted = "agent-committed"
	// FaultClaudeDone: a claude step's process ended (what it spent is
	// in its transcript); the item's spend is not checkpointed yet.
	FaultClaudeDone = step.FaultClaudeDone
	// FaultGatherIntent: a gather's state and checkpoint are on disk; its
	// results branch and parent worktree may not exist yet.
	FaultGatherIntent = "gather-intent"
	// FaultShardIntent: a shard's checkpoint is on disk; its branch and
	// parent worktree do not exist yet.
	FaultShardIntent = "shard-intent"
	// FaultParentCreated: a shard's or gatherer's branch and parent
	// worktree exist; nothing is merged yet.
	FaultParentCreated = "parent-created"
	// FaultGatherShardMerged: a shard's branch is merged into the results
	// branch; its items' outcomes and DLQ records are not imported yet.
	FaultGatherShardMerged = "gather-shard-merged"
	// FaultGatherShardClosed: a shard is imported and closed in the gather
	// state; later shards are not merged yet.
	FaultGatherShardClosed = "gather-shard-closed"
	// FaultPlanWritten: plan.json is written; the planning job's state
	// and parent worktree are not removed yet.
	FaultPlanWritten = "plan-written"
	// FaultDiscardWorktrees: `jobs discard` removed the job's worktrees
	// and branches; its state is not removed yet.
	FaultDiscardWorktrees = "discard-worktrees"
)

// FaultHook is called at every fault point with the point's name and the
// item id (or step number) it concerns; ctx is the job's context (it ends
// on an interrupt). It may kill or signal the process; when it returns,
// the job continues.
type FaultHook func(ctx context.Context, point, detail string)

var faultHook atomic.Pointer[FaultHook]

// SetFaultHook installs h process-wide (nil removes it). It exists for
// crash tests, which run the command in a child process: production code
// never sets it.
func SetFaultHook(h FaultHook) {
	if h == nil {
		faultHook.Store(nil)
		return
	}
	faultHook.Store(&h)
}

// fault calls the installed hook, if any.
func fault(ctx context.Context, point, detail string) {
	if h := faultHook.Load(); h != nil {
		(*h)(ctx, point, detail)
	}
}
