package main

import (
	"bufio"
	"fmt"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/prodigy-action/prodigy-action/runner"
)

func init() { registerCommand("worktree", newWorktreeCommand) }

func newWorktreeCommand(a *app) *cobra.Command {
	cmd := &cobra.Command{Use: "worktree", Short: "Manage agent worktrees"}
	cmd.AddCommand(newCleanOrphanedCommand(a))
	return cmd
}

func newCleanOrphanedCommand(a *app) *cobra.Command {
	var dryRun, force bool
	cmd := &cobra.Command{
		Use:   "clean-orphaned [JOB_ID]",
		Short: "Remove worktrees whose cleanup failed during a job (spec 136)",
		Long: `Remove the worktrees recorded in orphaned_worktrees/<repo>/<job_id>.json
(every job's, or one job's), delete their branches and run git worktree
prune. Asks for confirmation unless --force; --dry-run only lists them.
Worktrees that still cannot be removed stay in the registry.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			home, err := a.home()
			if err != nil {
				return usageErr(err)
			}
			id := ""
			if len(args) == 1 {
				id = args[0]
			}
			sets, err := runner.FindOrphans(home, id)
			if err != nil {
				return exitFor(err)
			}
			n := 0
			for _, s := range sets {
				for _, o := range s.Worktrees {
					n++
					fmt.Fprintf(a.stdout, "%s  job %s  item %s  (%s)\n", o.Path, s.JobID, orDash(o.ItemID), o.Error)
				}
			}
			if n == 0 {
				fmt.Fprintln(a.stderr, "no orphaned worktrees")
				return nil
			}
			if dryRun {
				fmt.Fprintf(a.stderr, "%d orphaned worktree(s); dry run, nothing removed\n", n)
				return nil
			}
			if !force && !a.confirm(fmt.Sprintf("Remove %d orphaned worktree(s)? [y/N] ", n)) {
				fmt.Fprintln(a.stderr, "aborted; nothing removed")
				return silentExit(exitJobFailed)
			}
			failedAny := false
			for _, s := range sets {
				removed, failed, err := runner.CleanOrphans(cmd.Context(), s)
				for _, p := range removed {
					fmt.Fprintf(a.stderr, "removed %s\n", p)
				}
				paths := make([]string, 0, len(failed))
				for p := range failed {
					paths = append(paths, p)
				}
				sort.Strings(paths)
				for _, p := range paths {
					failedAny = true
					fmt.Fprintf(a.stderr, "could not remove %s: %v\n", p, failed[p])
				}
				if err != nil {
					return &exitError{code: exitJobFailed, err: err}
				}
			}
			if failedAny {
				return silentExit(exitJobFailed)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "list what would be removed")
	cmd.Flags().BoolVarP(&force, "force", "f", false, "do not ask for confirmation")
	return cmd
}

// confirm asks a yes/no question on stderr and reads the answer from stdin;
// anything but y/yes (including EOF) is no.
func (a *app) confirm(question string) bool {
	fmt.Fprint(a.stderr, question)
	line, _ := bufio.NewReader(a.stdin).ReadString('\n')
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return true
	}
	return false
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
