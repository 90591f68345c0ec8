package worktreecmd

import (
	"context"
	"fmt"
	"sort"

	"github.com/spf13/cobra"

	"github.com/prodigy-action/prodigy-action/cli/cmdutil"
	"github.com/prodigy-action/prodigy-action/jobstore"
	"github.com/prodigy-action/prodigy-action/report"
)

func NewWorktreeCmd(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{Use: "worktree", Short: "Manage agent worktrees"}
	cmd.AddCommand(NewCleanOrphanedCmd(f))
	return cmd
}

type cleanOrphanedOptions struct {
	jobID       string
	dryRun, yes bool
}

func NewCleanOrphanedCmd(f *cmdutil.Factory) *cobra.Command {
	opts := &cleanOrphanedOptions{}
	cmd := &cobra.Command{
		Use:   "clean-orphaned [JOB_ID]",
		Short: "Remove worktrees whose cleanup failed, and worktrees no job needs any more",
		Long: `Remove the worktrees recorded in orphaned_worktrees/<repo>/<job_id>.json
(spec 136: cleanup failed during a job), and the worktrees under
$PRODIGY_HOME/worktrees that no job needs any more: preserved failed
worktrees and leftover parents of jobs that completed, and every worktree of
a job that was discarded (its state is gone). Worktrees of failed or
interrupted jobs stay for resume. Every job's, or one job's (JOB_ID, or
"latest"); their agent branches are deleted and git worktree prune runs. Asks for confirmation unless --yes (like dlq clear; --force is
an alias); --dry-run only
lists them. Worktrees that still cannot be removed stay in the registry.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				opts.jobID = args[0]
			}
			return runCleanOrphaned(cmd.Context(), f, opts)
		},
	}
	cmd.Flags().BoolVar(&opts.dryRun, "dry-run", false, "list what would be removed")
	cmd.Flags().BoolVarP(&opts.yes, "yes", "y", false, "do not ask for confirmation")
	cmd.Flags().BoolVarP(&opts.yes, "force", "f", false, "alias of --yes")
	return cmd
}

func runCleanOrphaned(ctx context.Context, f *cmdutil.Factory, opts *cleanOrphanedOptions) error {
	home, err := f.Home()
	if err != nil {
		return err
	}
	if opts.jobID, err = f.ResolveJobID(opts.jobID, ""); err != nil {
		return err
	}
	sets, err := cmdutil.FindOrphans(home, opts.jobID)
	if err != nil {
		return err
	}
	// Also offer what no job needs any more: preserved failed worktrees
	// and parents of completed jobs, and every worktree of a discarded job.
	left, err := findLeftovers(ctx, f.OpenRepo, home, opts.jobID)
	if err != nil {
		return err
	}
	sets = mergeSets(sets, left)
	n := 0
	for _, s := range sets {
		n += report.WriteOrphans(f.Out, s.JobID, s.Worktrees)
	}
	switch {
	case n == 0:
		fmt.Fprintln(f.ErrOut, "no orphaned worktrees")
		return nil
	case opts.dryRun:
		fmt.Fprintf(f.ErrOut, "%d orphaned worktree(s); dry run, nothing removed\n", n)
		return nil
	}
	if !opts.yes {
		if err := f.Confirm(fmt.Sprintf("Remove %d orphaned worktree(s)?", n), "--yes"); err != nil {
			return err
		}
	}
	failedAny := false
	for _, s := range sets {
		removed, failed, err := cleanOrphans(ctx, f.OpenRepo, s)
		for _, p := range removed {
			fmt.Fprintf(f.ErrOut, "removed %s\n", p)
		}
		paths := make([]string, 0, len(failed))
		for p := range failed {
			paths = append(paths, p)
		}
		sort.Strings(paths)
		for _, p := range paths {
			failedAny = true
			fmt.Fprintf(f.ErrOut, "could not remove %s: %v\n", p, failed[p])
		}
		if err != nil {
			return err
		}
	}
	if failedAny {
		return &cmdutil.ExitError{Code: cmdutil.ExitFailed}
	}
	return nil
}

// mergeSets adds the leftover worktrees to the registry sets of the same
// job (by registry file), skipping paths already listed.
func mergeSets(sets, more []jobstore.OrphanSet) []jobstore.OrphanSet {
	byFile := map[string]int{}
	for i, s := range sets {
		byFile[s.File] = i
	}
	for _, m := range more {
		i, ok := byFile[m.File]
		if !ok {
			byFile[m.File] = len(sets)
			sets = append(sets, m)
			continue
		}
		seen := map[string]bool{}
		for _, w := range sets[i].Worktrees {
			seen[w.Path] = true
		}
		for _, w := range m.Worktrees {
			if !seen[w.Path] {
				sets[i].Worktrees = append(sets[i].Worktrees, w)
			}
		}
		if sets[i].RepoDir == "" {
			sets[i].RepoDir = m.RepoDir
		}
	}
	return sets
}
