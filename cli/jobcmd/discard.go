package jobcmd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/prodigy-action/prodigy-action/cli/cmdutil"
	"github.com/prodigy-action/prodigy-action/gitops"
	"github.com/prodigy-action/prodigy-action/jobstore"
	"github.com/prodigy-action/prodigy-action/runner"
)

type discardOptions struct {
	jobID             string
	deleteBranch, yes bool
}

// NewDiscardCmd builds `jobs discard`.
func NewDiscardCmd(f *cmdutil.Factory) *cobra.Command {
	opts := &discardOptions{}
	cmd := &cobra.Command{
		Use:   "discard JOB_ID",
		Short: "Remove a job: its worktrees, agent branches, state, events, logs and DLQ",
		Long: `Remove everything a job left: its parent and agent worktrees (preserved
failed ones included), its agent branches, and its checkpoint, events,
session, transcripts, DLQ and orphan registry. The results branch stays
unless --delete-branch. A running job is refused. Asks for confirmation
unless --yes. JOB_ID may be "latest".`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.jobID = args[0]
			return runDiscard(cmd, f, opts)
		},
	}
	cmd.Flags().BoolVar(&opts.deleteBranch, "delete-branch", false, "also delete the job's results branch")
	cmd.Flags().BoolVarP(&opts.yes, "yes", "y", false, "do not ask for confirmation")
	return cmd
}

func runDiscard(cmd *cobra.Command, f *cmdutil.Factory, opts *discardOptions) error {
	p, err := f.Job(opts.jobID)
	if err != nil {
		return err
	}
	if !opts.yes {
		what := "its worktrees, agent branches, state and DLQ"
		if opts.deleteBranch {
			what += " and its results branch"
		}
		if err := f.Confirm(fmt.Sprintf("Discard job %s (repo %s): remove %s?", p.JobID, p.Repo, what), "--yes"); err != nil {
			return err
		}
	}
	d, err := discardJob(cmd.Context(), f.OpenRepo, p, opts.deleteBranch)
	for _, w := range d.Worktrees {
		fmt.Fprintf(f.ErrOut, "removed worktree %s\n", w)
	}
	for _, b := range d.Branches {
		fmt.Fprintf(f.ErrOut, "deleted branch %s\n", b)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(f.ErrOut, "discarded job %s\n", p.JobID)
	return nil
}

// discarded says what discardJob removed.
type discarded struct {
	Worktrees []string // worktree paths removed
	Branches  []string // branches deleted (agent branches, and the results branch if asked)
}

// discardJob removes a job that is not running: its worktrees (parent,
// pool, preserved failed ones) and agent branches, its results branch when
// deleteBranch is set, then everything the state directory holds for it
// (checkpoint, events, session, logs, DLQ, orphan registry: jobstore.RemoveJob).
// open opens the job's repository (Factory.OpenRepo: the engine's git
// options). A running job (its lock held) is a *cmdutil.UsageError.
// Failures to remove a worktree or branch are joined into the error; the
// state is removed only when they succeeded. Between the two it passes the
// fault point runner.FaultDiscardWorktrees.
func discardJob(ctx context.Context, open func(dir string) (*gitops.Client, error), p jobstore.Paths, deleteBranch bool) (discarded, error) {
	var d discarded
	if jobstore.Locked(p) {
		return d, cmdutil.UsageErrorf("job %s is running (its lock is held); stop it first", p.JobID)
	}
	cp, err := jobstore.LoadSummary(p)
	if err != nil {
		return d, fmt.Errorf("discard job %s: %w", p.JobID, err)
	}
	git, err := open(cp.RepoDir)
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
	runner.Fault(ctx, runner.FaultDiscardWorktrees, p.JobID)
	return d, jobstore.RemoveJob(p)
}

// agentBranches lists the job's agent branches (prodigy-agent/<job_id>/…,
// as the engine names them).
func agentBranches(ctx context.Context, git *gitops.Client, jobID string) ([]string, error) {
	names, err := git.Branches(ctx, "prodigy-agent/"+jobID+"/")
	if err != nil {
		return nil, fmt.Errorf("list the agent branches of %s: %w", jobID, err)
	}
	return names, nil
}
