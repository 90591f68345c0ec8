package runner

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/prodigy-action/prodigy-action/config"
	"github.com/prodigy-action/prodigy-action/runner/event"
	"github.com/prodigy-action/prodigy-action/runner/worktree"
)

// CleanupStatus is the cleanup_status of an agent_completed event:
// "Success", "Skipped" or {"Failed": "<error>"} (spec 136).
type CleanupStatus = worktree.CleanupStatus

// newTrees returns the job's worktree pool (runner/worktree), reporting
// to the job; sparse are the --sparse directories.
func (j *job) newTrees(sparse []string) (*worktree.Pool, error) {
	return worktree.New(worktree.Deps{
		Git: j.git, Paths: j.paths, ParentDir: j.parentDir, Branch: j.branch,
		Fresh: j.isolation == IsolationFresh, Sparse: j.wf.Worktree.Sparse, ParentFiles: parentNeedsFiles(j.wf, j.mergeMode),
		Clock: j.clock, Rand: j.rand,
		Report: worktree.Reporter{
			Logf: j.logf, Warn: j.warn,
			Created: func(path, agentID, branch string, pool bool) {
				j.events.Emit(event.WorktreeCreated{AgentID: agentID, Path: path, Branch: branch, Pool: pool})
			},
			Cleaned: func(agentID, itemID, path string) {
				j.events.Emit(event.WorktreeCleaned{AgentID: agentID, ItemID: itemID, Path: path})
			},
			Orphan: j.orphan, Unremovable: j.unremovable, RetireBranch: j.retireBranch,
		},
	}, sparse)
}

// parentNeedsFiles reports whether anything runs in, or reads from, the
// parent worktree: setup or reduce steps, a custom on_item_failure handler,
// --merge worktree, or a map input that is a command or a relative path.
func parentNeedsFiles(wf *config.Workflow, merge MergeMode) bool {
	if len(wf.Setup) > 0 || len(wf.Reduce) > 0 || len(wf.ErrorPolicy.CustomHandler) > 0 || merge != MergeTree {
		return true
	}
	in := wf.Map.Input
	return !filepath.IsAbs(in) || strings.ContainsAny(in, " \t|;&$<>(){}`'\"\\")
}

// orphan records a worktree cleanup could not remove and warns about it
// with the agent, item, path and error.
func (j *job) orphan(path, branch, agentID, itemID string, cause error) {
	j.warn(fmt.Sprintf("cleanup failed for agent %s (item %s) at %s: %v — the item's outcome is unaffected; remove it later with `prodigy-action worktree clean-orphaned %s`",
		orDash(agentID), orDash(itemID), path, cause, j.id))
	o := OrphanedWorktree{Path: path, Branch: branch, AgentID: agentID, ItemID: itemID, FailedAt: j.now().UTC(), Error: cause.Error()}
	if err := j.orphans.Add(o); err != nil {
		j.warn(fmt.Sprintf("could not record orphaned worktree %s: %v", path, err))
	}
	j.events.Emit(event.WorktreeCleanupFailed{AgentID: agentID, ItemID: itemID, Path: path, Error: cause.Error()})
}

// unremovable records a finished pool worktree's directory, already
// unregistered from git, whose files could not be deleted: it goes to the
// orphan registry (`worktree clean-orphaned` removes it) with a warning.
// Unlike orphan it emits no event: it may run after the job has ended.
func (j *job) unremovable(dir string, cause error) {
	j.warn(fmt.Sprintf("could not delete the files of a finished pool worktree at %s: %v — remove them with `prodigy-action worktree clean-orphaned %s`", dir, cause, j.id))
	if err := j.orphans.Add(OrphanedWorktree{Path: dir, FailedAt: j.now().UTC(), Error: cause.Error()}); err != nil {
		j.warn(fmt.Sprintf("could not record orphaned worktree %s: %v", dir, err))
	}
}

// retireBranch schedules an agent branch for deletion when the job ends.
func (j *job) retireBranch(b string) {
	if b == "" {
		return
	}
	j.deadMu.Lock()
	j.deadBranches = append(j.deadBranches, b)
	j.deadMu.Unlock()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
