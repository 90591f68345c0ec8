package runner

import (
	"errors"
	"io/fs"
	"os"
	"sync"
)

// OrphanFile is the registry of worktrees cleanup could not remove, at
// orphaned_worktrees/<repo>/<job_id>.json (spec 136).
type OrphanFile struct {
	JobID     string             `json:"job_id"`
	Repo      string             `json:"repo"`
	RepoDir   string             `json:"repo_dir"`
	Worktrees []OrphanedWorktree `json:"orphaned_worktrees"`
}

// orphanRegistry persists orphans as they are found; safe for concurrent use.
type orphanRegistry struct {
	mu   sync.Mutex
	path string
	file OrphanFile
}

func openOrphans(p Paths, repoDir string) (*orphanRegistry, error) {
	r := &orphanRegistry{path: p.Orphans(), file: OrphanFile{JobID: p.JobID, Repo: p.Repo, RepoDir: repoDir}}
	var f OrphanFile
	err := readJSON(r.path, &f)
	switch {
	case err == nil:
		r.file.Worktrees = f.Worktrees
	case errors.Is(err, fs.ErrNotExist):
	default:
		return nil, err
	}
	return r, nil
}

// add records an orphan and writes the registry atomically.
func (r *orphanRegistry) add(o OrphanedWorktree) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, w := range r.file.Worktrees {
		if w.Path == o.Path {
			r.file.Worktrees[i] = o
			return writeJSONAtomic(r.path, r.file)
		}
	}
	r.file.Worktrees = append(r.file.Worktrees, o)
	return writeJSONAtomic(r.path, r.file)
}

// list returns the recorded orphans.
func (r *orphanRegistry) list() []OrphanedWorktree {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]OrphanedWorktree{}, r.file.Worktrees...)
}

// LoadOrphans reads an orphan registry file.
func LoadOrphans(path string) (OrphanFile, error) {
	var f OrphanFile
	err := readJSON(path, &f)
	return f, err
}

// SaveOrphans writes an orphan registry file atomically, or removes it
// when no worktree is left in it.
func SaveOrphans(path string, f OrphanFile) error {
	if len(f.Worktrees) == 0 {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	return writeJSONAtomic(path, f)
}
