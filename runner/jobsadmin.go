package runner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/prodigy-action/prodigy-action/gitops"
	"github.com/prodigy-action/prodigy-action/jobstore"
)

// Discarded says what DiscardJob removed.
type Discarded struct {
	Worktrees []string // worktree paths removed
	Branches  []string // branches deleted (agent branches, and the results branch if asked)
}

// DiscardJob removes a job that is not running: its worktrees (parent,
// pool, preserved failed ones) and agent branches, its results branch when
// deleteBranch is set, then everything the state directory holds for it
// (checkpoint, events, session, logs, DLQ, orphan registry). A running job
// (its lock held) is a *UsageError. Failures to remove a worktree or branch
// are joined into the error; the state is removed only when they succeeded.
func DiscardJob(ctx context.Context, p Paths, deleteBranch bool) (Discarded, error) {
	var d Discarded
	if jobstore.Locked(p) {
		return d, usage(fmt.Errorf("job %s is running (its lock is held); stop it first", p.JobID))
	}
	cp, err := jobstore.LoadCheckpoint(p)
	if err != nil {
		return d, fmt.Errorf("discard job %s: %w", p.JobID, err)
	}
	git, err := gitops.New(cp.RepoDir, gitops.Options{})
	if err != nil {
		return d, fmt.Errorf("discard job %s: repository %s: %w", p.JobID, cp.RepoDir, err)
	}
	var errs []error
	entries, _ := os.ReadDir(p.WorktreeRoot())
	for _, e := range entries {
		path := filepath.Join(p.WorktreeRoot(), e.Name())
		if err := git.WorktreeRemove(ctx, path); err != nil {
			errs = append(errs, fmt.Errorf("remove worktree %s: %w", path, err))
			continue
		}
		d.Worktrees = append(d.Worktrees, path)
	}
	_ = git.WorktreePrune(ctx)
	branches, err := agentBranches(ctx, git, p.JobID)
	if err != nil {
		errs = append(errs, err)
	}
	if deleteBranch && cp.ResultsBranch != "" {
		if ok, _ := git.BranchExists(ctx, cp.ResultsBranch); ok {
			branches = append(branches, cp.ResultsBranch)
		}
	}
	if len(branches) > 0 {
		if err := git.DeleteBranches(ctx, branches); err != nil {
			errs = append(errs, fmt.Errorf("delete branches: %w", err))
		} else {
			d.Branches = branches
		}
	}
	if len(errs) > 0 {
		return d, errors.Join(errs...)
	}
	fault(ctx, FaultDiscardWorktrees, p.JobID)
	return d, jobstore.RemoveJob(p)
}

// agentBranches lists the job's agent branches (prodigy-agent/<job_id>/…).
func agentBranches(ctx context.Context, git *gitops.Client, jobID string) ([]string, error) {
	names, err := git.Branches(ctx, "prodigy-agent/"+jobID+"/")
	if err != nil {
		return nil, fmt.Errorf("list the agent branches of %s: %w", jobID, err)
	}
	return names, nil
}

// FindLeftovers finds worktrees under home/worktrees that no running or
// resumable job needs: those of jobs whose state is gone (discarded,
// purged) and those left after a job completed (a preserved failed
// worktree, a parent whose removal failed). Worktrees of failed or
// interrupted jobs are kept for `resume`. Each set names the job and the
// repository the worktrees belong to, so CleanOrphans removes them (and
// their agent branches). jobID != "" limits the search to that job.
func FindLeftovers(ctx context.Context, home, jobID string) ([]OrphanSet, error) {
	roots, err := filepath.Glob(filepath.Join(home, "worktrees", "*", "*"))
	if err != nil {
		return nil, fmt.Errorf("list worktrees: %w", err)
	}
	var out []OrphanSet
	for _, root := range roots {
		p := Paths{Home: home, Repo: filepath.Base(filepath.Dir(root)), JobID: filepath.Base(root)}
		if jobID != "" && p.JobID != jobID {
			continue
		}
		why := "its job no longer exists"
		if cp, err := jobstore.LoadCheckpoint(p); err == nil {
			if cp.Status != StatusCompleted || jobstore.Locked(p) {
				continue
			}
			why = "its job completed"
		} else if jobstore.Locked(p) || dirExists(p.JobStateDir()) {
			continue // a job starting, or state we cannot read: leave it alone
		}
		set := OrphanSet{File: p.Orphans(), OrphanFile: jobstore.OrphanFile{JobID: p.JobID, Repo: p.Repo}}
		if f, err := jobstore.LoadOrphans(p.Orphans()); err == nil {
			set.Worktrees = f.Worktrees
			set.RepoDir = f.RepoDir
		}
		known := map[string]bool{}
		for _, w := range set.Worktrees {
			known[w.Path] = true
		}
		entries, _ := os.ReadDir(root)
		for _, e := range entries {
			path := filepath.Join(root, e.Name())
			if !e.IsDir() || known[path] {
				continue
			}
			w := OrphanedWorktree{Path: path, AgentID: e.Name(), Error: "left over: " + why}
			if git, err := gitops.New(path, gitops.Options{}); err == nil {
				if set.RepoDir == "" {
					set.RepoDir = filepath.Dir(git.CommonDir())
				}
				if b, err := git.CurrentBranch(ctx, path); err == nil && strings.HasPrefix(b, "prodigy-agent/") {
					w.Branch = b
				}
			}
			set.Worktrees = append(set.Worktrees, w)
		}
		if len(set.Worktrees) > 0 {
			out = append(out, set)
		}
	}
	return out, nil
}

func dirExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}
