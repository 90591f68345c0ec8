package gitops

import (
	"bufio"
	"os"
	"path"
	"path/filepath"

	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/format/index"
)

// nothingToClean reports whether `git clean -ffdx` would have nothing to
// delete in the worktree dir: every file, symbolic link and directory under
// it (but the top-level .git) is in its index, or is a directory that
// holds index entries. It reads the index and the directories in-process,
// which costs a fraction of a git process (issue 14: clean in proportion to
// what an attempt left, not to the repository). false means "run git": an
// untracked or ignored path was found, or something is not understood — an
// index git may have changed in a way go-git does not read (a sparse index,
// skip-worktree entries, a future version), a tracked file that became a
// directory, an unreadable directory.
func nothingToClean(dir string) bool {
	gitDir, ok := worktreeGitDir(dir)
	if !ok {
		return false
	}
	f, err := os.Open(filepath.Join(gitDir, "index"))
	if err != nil {
		return false
	}
	defer f.Close()
	var idx index.Index
	if err := index.NewDecoder(bufio.NewReaderSize(f, 64<<10)).Decode(&idx); err != nil {
		return false // includes a sparse index (a mandatory extension go-git does not read)
	}
	files := make(map[string]filemode.FileMode, len(idx.Entries))
	dirs := map[string]bool{"": true}
	for _, e := range idx.Entries {
		if e.SkipWorktree || e.Stage != 0 { // 0: merged (go-git's index.Merged is 1)
			return false
		}
		files[e.Name] = e.Mode
		for d := path.Dir(e.Name); d != "." && !dirs[d]; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	var walk func(rel string) bool
	walk = func(rel string) bool {
		entries, err := os.ReadDir(filepath.Join(dir, filepath.FromSlash(rel)))
		if err != nil {
			return false
		}
		for _, de := range entries {
			name := de.Name()
			if rel == "" && name == ".git" {
				continue
			}
			p := name
			if rel != "" {
				p = rel + "/" + name
			}
			if mode, tracked := files[p]; tracked {
				if de.IsDir() && mode != filemode.Submodule {
					return false // a tracked file replaced by a directory
				}
				continue
			}
			if !de.IsDir() || !dirs[p] || !walk(p) {
				return false // untracked, ignored, or not understood
			}
		}
		return true
	}
	return walk("")
}
