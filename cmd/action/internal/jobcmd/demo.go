package jobcmd

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/prodigy-action/prodigy-action/cmd/action/internal/cmdutil"

	"github.com/prodigy-action/prodigy-action/report"
	"github.com/prodigy-action/prodigy-action/runner"
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
	ro, err := f.RunnerOptions("", "")
	if err != nil {
		return err
	}
	repo, err := makeDemoRepo(opts.dir)
	if err != nil {
		return err
	}
	fmt.Fprintf(f.ErrOut, "demo repository: %s\n", repo)
	v := runner.ValidateFile(filepath.Join(repo, "workflow.yml"), runner.ValidateOptions{})
	if err := v.Err(); err != nil {
		return err
	}
	ro.Workflow, ro.RepoDir = v.Workflow, repo
	res, err := runner.Run(ctx, ro)
	if res != nil && !opts.json {
		printDemoOutcome(f.ErrOut, repo, res)
	}
	return f.FinishJob(res, err, opts.json)
}

// makeDemoRepo creates the sample repository with the embedded files.
// TODO(gitops): the git init/add/commit below move to gitops once it has
// repository-creation operations; this is the CLI's only git process.
func makeDemoRepo(dir string) (string, error) {
	files, err := runner.DemoFiles()
	if err != nil {
		return "", err
	}
	if dir == "" {
		if dir, err = os.MkdirTemp("", "prodigy-demo-*"); err != nil {
			return "", fmt.Errorf("create the demo repository: %w", err)
		}
	} else if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return "", cmdutil.UsageErrorf("--dir %s is not empty", dir)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("create the demo repository: %w", err)
	}
	files["README.md"] = []byte("# prodigy-action demo\n\nA sample repository for `action demo`.\n")
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return "", fmt.Errorf("create the demo repository: %w", err)
		}
	}
	for _, args := range [][]string{
		{"init", "-q", "-b", "main"},
		{"add", "."},
		{"-c", "user.name=prodigy-demo", "-c", "user.email=demo@example.invalid", "commit", "-q", "-m", "demo repository"},
	} {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, out)
		}
	}
	return filepath.Abs(dir)
}

func printDemoOutcome(w io.Writer, repo string, res *runner.Result) {
	graph, _ := exec.Command("git", "-C", repo, "log", "--graph", "--oneline", "--decorate=no", res.ResultsBranch).CombinedOutput()
	files, _ := exec.Command("git", "-C", repo, "ls-tree", "-r", "--name-only", res.ResultsBranch, "greetings").CombinedOutput()
	report.WriteDemoOutcome(w, res, string(graph), string(files))
}
