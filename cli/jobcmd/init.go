package jobcmd

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/prodigy-action/prodigy-action/cli/cmdutil"
)

// StarterWorkflow is what `prodigy-action init` writes: the smallest
// workflow that runs on any repository as it is (it lists the repository's
// Markdown files with git and reports each one's line count), commented
// so that a user can turn it into their own.
const StarterWorkflow = `# A starter prodigy-action workflow (written by ` + "`prodigy-action init`" + `).
#
#   prodigy-action validate workflow.yml   # check it, print the retry schedule
#   prodigy-action run workflow.yml        # run it (commit this file first to keep it)
#   prodigy-action dlq list --job-id latest
#
# Every item runs in its own git worktree on its own branch; commits made
# there are merged into the results branch prodigy/<job id>. Your checkout
# is never modified.
name: starter

map:
  # The work items: a JSON file in the repository, or a command whose
  # stdout is a JSON array (here: one object per Markdown file that git
  # tracks, e.g. {"path": "README.md"}).
  input: >-
    git ls-files -z -- '*.md' | tr '\0' '\n' | grep -v '["\\]' |
    awk 'BEGIN { printf "[" } { printf "%s{\"path\": \"%s\"}", (NR > 1 ? ", " : ""), $0 } END { print "]" }'
  id_field: path        # item ids (and DLQ labels) are the paths
  max_parallel: 4       # agents at a time

  error_policy:
    on_item_failure: dlq          # keep what still fails in the dead letter queue
    continue_on_failure: true
    retry_config:
      max_attempts: 2             # one retry after a failure
      backoff:
        exponential:
          initial: 1s

  # What each agent does, with ${item.<field>} from its item. A shell
  # step fails the attempt with a non-zero exit; its output is kept per
  # item (` + "`prodigy-action logs latest ITEM`" + `).
  agent_template:
    - shell: |
        lines=$(wc -l < "${item.path}")
        echo "${item.path}: ${lines} lines"
    # A Claude Code step instead (needs ` + "`claude`" + ` and ANTHROPIC_API_KEY):
    # - claude: "Fix the spelling mistakes in ${item.path} and commit the change."
    #   commit_required: true

# Runs once after every item, on the results branch.
reduce:
  - shell: echo "checked ${map.successful} of ${map.total} files, ${map.failed} failed"
`

// StarterActionsWorkflow is what `prodigy-action init --actions` writes
// beside the starter: a GitHub Actions workflow that runs it with the
// Action.
const StarterActionsWorkflow = `# Runs the prodigy-action workflow workflow.yml (written by ` + "`prodigy-action init --actions`" + `).
name: prodigy
on:
  workflow_dispatch:

permissions:
  contents: read        # checkout (use ` + "`write`" + ` only with ` + "`push: true`" + `)
  pull-requests: write  # the sticky PR comment

jobs:
  fanout:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
        with:
          fetch-depth: 0              # agents branch and merge from full history
          persist-credentials: false  # agents must not read the job token from .git/config
      - id: prodigy
        uses: prodigy-action/prodigy-action@v1
        env:
          # Only claude: steps need it; add the secret under Settings → Secrets.
          ANTHROPIC_API_KEY: ${{ secrets.ANTHROPIC_API_KEY }}
        with:
          workflow: workflow.yml
      - run: echo "${{ steps.prodigy.outputs.dlq-count }} item(s) in the DLQ"
`

type initOptions struct {
	dir     string
	actions bool
	force   bool
}

// NewInitCmd is `prodigy-action init`: it writes the starter workflow
// (and with --actions the GitHub Actions workflow that runs it). An
// existing file is refused (exit 2, nothing written) unless --force.
func NewInitCmd(f *cmdutil.Factory) *cobra.Command {
	opts := &initOptions{}
	cmd := &cobra.Command{
		Use:   "init",
		Short: "Write a commented starter workflow.yml (and with --actions a GitHub Actions workflow running it)",
		Long: `Write workflow.yml, a commented minimal workflow that runs on any git
repository as it is (one item per Markdown file, a shell step per item), into
--dir (default: the current directory). With --actions also write
.github/workflows/prodigy.yml, which runs it with the Action. Existing files are never replaced
unless --force; nothing is written when one would be.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runInit(f, opts) },
	}
	cmd.Flags().StringVar(&opts.dir, "dir", ".", "directory to write into (your repository's root)")
	cmd.Flags().BoolVar(&opts.actions, "actions", false, "also write .github/workflows/prodigy.yml")
	cmd.Flags().BoolVar(&opts.force, "force", false, "replace existing files")
	return cmd
}

func runInit(f *cmdutil.Factory, opts *initOptions) error {
	files := []struct{ path, body string }{{filepath.Join(opts.dir, "workflow.yml"), StarterWorkflow}}
	if opts.actions {
		files = append(files, struct{ path, body string }{filepath.Join(opts.dir, ".github", "workflows", "prodigy.yml"), StarterActionsWorkflow})
	}
	if st, err := os.Stat(opts.dir); err != nil || !st.IsDir() {
		return cmdutil.UsageErrorf("--dir %s is not a directory", opts.dir)
	}
	if !opts.force {
		for _, fl := range files {
			if _, err := os.Lstat(fl.path); err == nil {
				return cmdutil.UsageErrorf("%s exists; nothing was written (--force replaces it)", fl.path)
			} else if !errors.Is(err, fs.ErrNotExist) {
				return cmdutil.UsageErrorf("cannot write %s: %w", fl.path, err)
			}
		}
	}
	for _, fl := range files {
		if err := os.MkdirAll(filepath.Dir(fl.path), 0o755); err != nil {
			return fmt.Errorf("init: %w", err)
		}
		if err := f.WriteOutput(fl.path, false, func(w io.Writer) error {
			_, err := io.WriteString(w, fl.body)
			return err
		}); err != nil {
			return err
		}
		fmt.Fprintf(f.ErrOut, "wrote %s\n", fl.path)
	}
	fmt.Fprintf(f.ErrOut, "next: prodigy-action validate %s && prodigy-action run %s\n",
		files[0].path, files[0].path)
	return nil
}
