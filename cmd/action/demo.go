package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/prodigy-action/prodigy-action/config"
	"github.com/prodigy-action/prodigy-action/examples"
	"github.com/prodigy-action/prodigy-action/gitops"
	"github.com/prodigy-action/prodigy-action/runner"
)

func init() { registerCommand("demo", newDemoCommand) }

func newDemoCommand(a *app) *cobra.Command {
	var dir string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run the embedded example workflow end to end on a fresh sample repository",
		Long: `Create a small git repository (in --dir, default a new temp directory),
commit the embedded example workflow and its items, and run it: four items
are processed in parallel worktrees and merged into the results branch, one
fails on purpose, is retried with backoff and lands in the dead letter queue.
State goes to $PRODIGY_HOME (default ~/.prodigy), as for any job.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			repo, err := makeDemoRepo(cmd.Context(), dir)
			if err != nil {
				return &exitError{code: exitJobFailed, err: err}
			}
			fmt.Fprintf(a.stderr, "demo repository: %s\n", repo)
			wf, err := config.Load(filepath.Join(repo, "workflow.yml"))
			if err != nil {
				return usageErr(err)
			}
			opts, err := a.runOptions("", "")
			if err != nil {
				return err
			}
			opts.Workflow, opts.RepoDir = wf, repo
			res, err := runner.Run(cmd.Context(), opts)
			if res != nil && !asJSON {
				a.printDemoOutcome(cmd.Context(), repo, res)
			}
			return a.finishJob(res, err, asJSON)
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "where to create the sample repository (must not exist or be empty)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as one JSON object on stdout")
	return cmd
}

// makeDemoRepo creates the sample repository with the embedded files.
func makeDemoRepo(ctx context.Context, dir string) (string, error) {
	var err error
	if dir == "" {
		dir, err = os.MkdirTemp("", "prodigy-demo-*")
		if err != nil {
			return "", err
		}
	} else if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return "", fmt.Errorf("--dir %s is not empty", dir)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	files := map[string]string{"workflow.yml": "demo/workflow.yml", "items.json": "demo/items.json"}
	for name, src := range files {
		data, err := examples.Demo.ReadFile(src)
		if err != nil {
			return "", err
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return "", err
		}
	}
	readme := "# prodigy-action demo\n\nA sample repository for `action demo`.\n"
	if err := os.WriteFile(filepath.Join(dir, "README.md"), []byte(readme), 0o644); err != nil {
		return "", err
	}
	who := gitops.Identity{Name: "prodigy-demo", Email: "demo@example.invalid"}
	if _, err := gitops.InitRepository(ctx, dir, "main", "demo repository", who, gitops.Options{}); err != nil {
		return "", err
	}
	return filepath.Abs(dir)
}

func (a *app) printDemoOutcome(ctx context.Context, repo string, res *runner.Result) {
	w := a.stderr
	fmt.Fprintf(w, "\nresults branch %s:\n", res.ResultsBranch)
	if git, err := gitops.New(repo, gitops.Options{}); err == nil {
		graph, _ := git.LogGraph(ctx, res.ResultsBranch)
		fmt.Fprintf(w, "%s", graph)
		files, _ := git.ListFiles(ctx, res.ResultsBranch, "greetings")
		fmt.Fprintf(w, "\nfiles on the results branch:\n")
		for _, f := range files {
			fmt.Fprintln(w, f)
		}
	}
	fmt.Fprintf(w, "\nnext steps:\n")
	fmt.Fprintf(w, "  go run ./cmd/action dlq list --job-id %s\n", res.JobID)
	for _, it := range res.Items {
		if it.State == runner.ItemDLQ {
			fmt.Fprintf(w, "  go run ./cmd/action dlq inspect %s --job-id %s\n", it.ItemID, res.JobID)
			break
		}
	}
	fmt.Fprintf(w, "  go run ./cmd/action dlq retry %s   # re-runs it; the failure is deterministic, so it fails again\n", res.JobID)
	fmt.Fprintf(w, "  go run ./cmd/action status %s\n", res.JobID)
}
