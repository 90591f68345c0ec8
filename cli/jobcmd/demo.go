package jobcmd

import (
	"context"
	"fmt"
	"io"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/prodigy-action/prodigy-action/cli/cmdutil"
	"github.com/prodigy-action/prodigy-action/config"

	"github.com/prodigy-action/prodigy-action/report"
	"github.com/prodigy-action/prodigy-action/runner"
	"github.com/prodigy-action/prodigy-action/validate"
)

type demoOptions struct {
	dir  string
	json bool
}

func NewDemoCmd(f *cmdutil.Factory) *cobra.Command {
	opts := &demoOptions{}
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run the embedded example workflow end to end on a fresh sample repository",
		Long: `Create a small git repository (in --dir, default a new temp directory),
commit the embedded example workflow and its items, and run it: four items
are processed in parallel worktrees and merged into the results branch, one
fails on purpose, is retried with backoff and lands in the dead letter queue.
State goes to $PRODIGY_HOME (default ~/.prodigy), as for any job.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runDemo(cmd.Context(), f, opts) },
	}
	cmd.Flags().StringVar(&opts.dir, "dir", "", "where to create the sample repository (must not exist or be empty)")
	cmd.Flags().BoolVar(&opts.json, "json", false, "print the result as one JSON object on stdout")
	return cmd
}

func runDemo(ctx context.Context, f *cmdutil.Factory, opts *demoOptions) error {
	eng, err := f.JobEngine()
	if err != nil {
		return err
	}
	repo, err := makeDemoRepo(ctx, opts.dir)
	if err != nil {
		return err
	}
	fmt.Fprintf(f.ErrOut, "demo repository: %s\n", repo)
	v := validate.File(filepath.Join(repo, "workflow.yml"), validate.Options{})
	if err := v.Err(); err != nil {
		return err
	}
	res, err := eng.Run(ctx, runner.RunSpec{Workflow: v.Workflow, RepoDir: repo, Agents: f.Agents(0, "", config.ClaudeSettings{})})
	if res != nil && !opts.json {
		printDemoOutcome(ctx, f.ErrOut, repo, res)
	}
	return f.FinishJob(res, err, opts.json)
}

func printDemoOutcome(ctx context.Context, w io.Writer, repo string, res *runner.Result) {
	graph, files := demoBranchView(ctx, repo, res.ResultsBranch)
	report.WriteDemoOutcome(w, res, graph, files)
}
