package worktreecmd_test

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prodigy-action/prodigy-action/cli/clitest"
	"github.com/prodigy-action/prodigy-action/cli/cmdutil"
	"github.com/prodigy-action/prodigy-action/cli/worktreecmd"
	"github.com/prodigy-action/prodigy-action/gitops/gitopstest"
	"github.com/prodigy-action/prodigy-action/jobstore"
	"github.com/prodigy-action/prodigy-action/runner/runnertest"
)

// TestCleanOrphansRemovesWhatCleanupCouldNot: an agent worktree whose
// cleanup failed (an immutable file in it) is in the orphan registry;
// while the cause persists cleaning it fails and it stays; then it is
// removed, the registry emptied and only the checkout's own worktree is
// left.
func TestCleanOrphansRemovesWhatCleanupCouldNot(t *testing.T) {
	runnertest.RequireImmutableFiles(t)
	for _, iso := range []string{"pool", "fresh"} {
		t.Run(iso, func(t *testing.T) {
			repo := gitopstest.Repo(t, map[string]string{"items.json": `[{"id": "stuck"}]`})
			wf := clitest.Workflow(t, `
name: cleanup
mode: mapreduce
map:
  input: items.json
  agent_template:
    - shell: |
        echo done > done.txt && git add done.txt && git commit -qm done
        mkdir -p junk && echo x > junk/locked && chattr +i junk/locked
`)
			home := t.TempDir()
			runnertest.UnlockJunkAfter(t, home)
			if code, _, errOut := clitest.Home(home, "run", wf, "--repo", repo, "--job-id", "job-1", "--isolation", iso); code != 0 {
				t.Fatalf("run: exit %d\n%s", code, errOut)
			}
			sets, err := jobstore.FindOrphans(home, "job-1")
			if err != nil || len(sets) != 1 || len(sets[0].Worktrees) != 1 {
				t.Fatalf("FindOrphans = %+v, %v", sets, err)
			}
			orphan := sets[0].Worktrees[0]
			f := cmdutil.NewFactory(nil, io.Discard, io.Discard, func(string) string { return "" })
			ctx := context.Background()
			// While the cause persists, cleaning fails and the orphan stays.
			if _, failed, _ := worktreecmd.CleanOrphans(ctx, f.OpenRepo, sets[0]); len(failed) != 1 {
				t.Fatalf("clean with the cause present: failed = %v", failed)
			}
			_ = exec.Command("chattr", "-i", filepath.Join(orphan.Path, "junk", "locked")).Run()
			sets, _ = jobstore.FindOrphans(home, "job-1")
			removed, failed, err := worktreecmd.CleanOrphans(ctx, f.OpenRepo, sets[0])
			if err != nil || len(failed) != 0 || len(removed) != 1 {
				t.Fatalf("clean: removed %v failed %v err %v", removed, failed, err)
			}
			if _, err := os.Stat(orphan.Path); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("orphan still on disk: %v", err)
			}
			if sets, _ := jobstore.FindOrphans(home, ""); len(sets) != 0 {
				t.Errorf("registry not emptied: %+v", sets)
			}
			if wt := gitopstest.Out(t, repo, "worktree", "list", "--porcelain"); strings.Count(wt, "worktree ") != 1 {
				t.Errorf("worktrees left:\n%s", wt)
			}
		})
	}
}
