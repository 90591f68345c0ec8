package jobcmd

// The sample repository of `demo`: the embedded example workflow and its
// items committed to a fresh git repository, and what the demo shows of the
// results branch afterwards.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/prodigy-action/prodigy-action/cli/cmdutil"
	"github.com/prodigy-action/prodigy-action/examples"
	"github.com/prodigy-action/prodigy-action/gitops"
)

// demoFiles returns the files of `prodigy-action demo`'s sample repository
// (workflow.yml, items.json), from the embedded examples.
func demoFiles() (map[string][]byte, error) {
	files := map[string][]byte{}
	for name, src := range map[string]string{"workflow.yml": "demo/workflow.yml", "items.json": "demo/items.json"} {
		data, err := examples.Demo.ReadFile(src)
		if err != nil {
			return nil, fmt.Errorf("read the embedded demo: %w", err)
		}
		files[name] = data
	}
	return files, nil
}

// makeDemoRepo creates the sample repository of `prodigy-action demo` in dir (a new
// temp directory when dir is ""): the embedded files and a README in one
// commit on main. A dir that exists and is not empty is a *cmdutil.UsageError. It
// returns the repository's absolute path.
func makeDemoRepo(ctx context.Context, dir string) (string, error) {
	files, err := demoFiles()
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
	files["README.md"] = []byte("# prodigy-action demo\n\nA sample repository for `prodigy-action demo`.\n")
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return "", fmt.Errorf("create the demo repository: %w", err)
		}
	}
	who := gitops.Identity{Name: "prodigy-demo", Email: "demo@example.invalid"}
	if _, err := gitops.InitRepository(ctx, dir, "main", "demo repository", who, gitops.Options{}); err != nil {
		return "", fmt.Errorf("create the demo repository: %w", err)
	}
	return filepath.Abs(dir)
}

// demoBranchView returns what the demo shows of a results branch: its
// history as a graph and the files under greetings/ ("" where git could
// not say).
func demoBranchView(ctx context.Context, repo, branch string) (graph, files string) {
	git, err := gitops.New(repo, gitops.Options{})
	if err != nil {
		return "", ""
	}
	graph, _ = git.LogGraph(ctx, branch)
	names, _ := git.ListFiles(ctx, branch, "greetings")
	if len(names) > 0 {
		files = strings.Join(names, "\n") + "\n"
	}
	return graph, files
}
