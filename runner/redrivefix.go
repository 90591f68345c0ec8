package runner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/prodigy-action/prodigy-action/config"
	"github.com/prodigy-action/prodigy-action/gitops"
	"github.com/prodigy-action/prodigy-action/internal/brief"
	"github.com/prodigy-action/prodigy-action/jobstore"
)

// redriveWorkflow loads the workflow a resume or redrive runs, so that a
// fix to the workflow reaches it: file (--workflow) when given, else the
// job's original path in the checkout, else (with a warning) the copy
// stored when the job started.
func redriveWorkflow(cp *jobstore.Checkpoint, p Paths, file string) (*config.Workflow, string, error) {
	if file != "" {
		wf, err := config.Load(file)
		if err != nil {
			return nil, "", fmt.Errorf("--workflow: %w", err)
		}
		return wf, "", nil
	}
	if cp.WorkflowPath != "" {
		if _, err := os.Stat(cp.WorkflowPath); err == nil {
			wf, err := config.Load(cp.WorkflowPath)
			return wf, "", err
		}
	}
	if _, err := os.Stat(p.WorkflowCopy()); err != nil {
		return nil, "", fmt.Errorf("job %s: workflow %s is gone and no copy was kept; pass --workflow FILE", cp.JobID, cp.WorkflowPath)
	}
	wf, err := config.Load(p.WorkflowCopy())
	warn := fmt.Sprintf("workflow %s is not in the checkout; running the copy stored when job %s started (changes made since do not apply; pass --workflow FILE to use another)", cp.WorkflowPath, cp.JobID)
	return wf, warn, err
}

// mergeOnto merges ref (e.g. a main branch that has the fix) into the
// results branch before a redrive, so the redriven agents start from it.
// A conflict changes nothing and fails with the conflicting paths; an
// unknown ref is a usage error.
func (j *job) mergeOnto(ctx context.Context, ref string) error {
	msg := fmt.Sprintf("Merge %s into %s (redrive --onto)\n\nProdigy-Job: %s\n", ref, j.branch, j.id)
	commit, err := j.git.MergeTree(ctx, "refs/heads/"+j.branch, ref, msg)
	var mc *gitops.MergeConflictError
	switch {
	case errors.As(err, &mc):
		files := "(git reported no paths)"
		if len(mc.Files) > 0 {
			files = strings.Join(mc.Files, ", ")
		}
		return fmt.Errorf("%w: --onto %s conflicts with results branch %s in: %s; nothing was changed "+
			"(merge %s into %s yourself and resolve the conflict, or pick another --onto)", ErrJobFailed, ref, j.branch, files, ref, j.branch)
	case errors.Is(err, gitops.ErrRefNotFound):
		return usage(fmt.Errorf("--onto %s: no such branch or revision", ref))
	case err != nil:
		return fmt.Errorf("%w: --onto %s: %w", ErrJobFailed, ref, err)
	}
	if _, err := os.Stat(j.parentDir); err == nil {
		if err := j.git.SyncWorktree(ctx, j.parentDir); err != nil {
			return fmt.Errorf("%w: update the parent worktree after merging %s: %w", ErrJobFailed, ref, err)
		}
	}
	j.logf("merged %s into %s (now %s); redriven items start from it", ref, j.branch, brief.SHA(commit))
	return nil
}
