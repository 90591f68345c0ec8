package gitops

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestCleanWorktreeRunsGitOnlyWhenItCannotTell: CleanWorktree deletes what
// git clean -ffdx would — untracked, ignored, an empty directory, a nested
// repository — without starting git, and leaves a worktree with nothing to
// delete as it is; an index this reader does not vouch for (a sparse
// index) or a tracked file that became a directory makes it run git.
func TestCleanWorktreeRunsGitOnlyWhenItCannotTell(t *testing.T) {
	t.Parallel()
	files := map[string]string{"a/x.txt": "x\n", "a/deep/y.txt": "y\n", "b.txt": "b\n", ".gitignore": "*.log\n"}
	for _, tc := range []struct {
		name   string
		setup  func(t *testing.T, dir string)
		gone   string // a path that must be gone afterwards ("" none)
		runGit bool
	}{
		{name: "nothing left", setup: func(t *testing.T, dir string) {
			commitFiles(t, dir, "agent", map[string]string{"out/1.txt": "1\n", "a/x.txt": "changed\n"})
		}},
		{name: "untracked cache and index v4", setup: func(t *testing.T, dir string) {
			git(t, dir, "update-index", "--untracked-cache", "--index-version", "4")
			commitFiles(t, dir, "agent", map[string]string{"out/1.txt": "1\n"})
		}},
		{name: "untracked file", gone: "a/deep/new.txt"},
		{name: "ignored file", gone: "a/z.log"},
		{name: "untracked directory", gone: "new/deeper/f.txt"},
		{name: "empty directory", gone: "empty", setup: func(t *testing.T, dir string) {
			if err := os.Mkdir(filepath.Join(dir, "empty"), 0o755); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "nested repository", gone: "nested", setup: func(t *testing.T, dir string) {
			git(t, dir, "init", "-q", "nested")
		}},
		{name: "sparse index", runGit: true, setup: func(t *testing.T, dir string) {
			git(t, dir, "sparse-checkout", "set", "--cone", "--sparse-index", "a")
		}},
		{name: "tracked file became a directory", runGit: true, setup: func(t *testing.T, dir string) {
			if err := os.Remove(filepath.Join(dir, "b.txt")); err != nil {
				t.Fatal(err)
			}
			writeFiles(t, dir, map[string]string{"b.txt/inside": "i\n"})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir, _ := newRepo(t, files, true)
			c, count := countingClient(t, dir, isolatedEnv())
			if tc.setup != nil {
				tc.setup(t, dir)
			}
			if tc.gone != "" && tc.name != "empty directory" && tc.name != "nested repository" {
				writeFiles(t, dir, map[string]string{tc.gone: "left over\n"})
			}
			if err := c.CleanWorktree(bg(), dir); err != nil {
				t.Fatal(err)
			}
			if ran := count("clean") > 0; ran != tc.runGit {
				t.Errorf("git clean ran: %v, want %v", ran, tc.runGit)
			}
			if tc.gone != "" {
				if _, err := os.Lstat(filepath.Join(dir, tc.gone)); !os.IsNotExist(err) {
					t.Errorf("%s is still there (%v)", tc.gone, err)
				}
			}
			if st := git(t, dir, "status", "--porcelain", "--ignored", "--untracked-files=all"); st != "" && tc.name != "tracked file became a directory" {
				t.Errorf("worktree not clean:\n%s", st)
			}
		})
	}
}

// TestIndexEntriesMatchLsFiles: the small index reader lists exactly what
// `git ls-files` lists, in its order, in index versions 2, 3 (an
// intent-to-add entry sets extended flags) and 4 (prefix-compressed
// names), gitlinks included.
func TestIndexEntriesMatchLsFiles(t *testing.T) {
	t.Parallel()
	files := map[string]string{"a/x.txt": "x\n", "a/deep/y.txt": "y\n", "a/deep/yy.txt": "yy\n", "b.txt": "b\n", "z/long-name-" + strings.Repeat("n", 40) + ".txt": "n\n"}
	dir, _ := newRepo(t, files, true)
	git(t, dir, "update-index", "--add", "--cacheinfo", "160000,"+git(t, dir, "rev-parse", "HEAD")+",sub")
	for _, step := range []func(){
		func() { git(t, dir, "update-index", "--index-version", "2") },
		func() {
			writeFiles(t, dir, map[string]string{"later.txt": "l\n"})
			git(t, dir, "add", "-N", "later.txt")
			git(t, dir, "update-index", "--index-version", "3")
		},
		func() { git(t, dir, "update-index", "--index-version", "4") },
	} {
		step()
		data, err := os.ReadFile(filepath.Join(dir, ".git", "index"))
		if err != nil {
			t.Fatal(err)
		}
		got, ok := indexEntries(data)
		if !ok {
			t.Fatalf("index version %s not read", git(t, dir, "update-index", "--show-index-version"))
		}
		want := strings.Split(git(t, dir, "ls-files"), "\n")
		var names []string
		gitlinks := map[string]bool{}
		for _, e := range got {
			names = append(names, e.name)
			gitlinks[e.name] = e.gitlink
		}
		if !slices.Equal(names, want) || !gitlinks["sub"] || gitlinks["b.txt"] {
			t.Errorf("indexEntries = %v, ls-files = %q", got, want)
		}
	}
}
