package jobstore

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"
)

// OrphanedWorktree is a worktree cleanup could not remove (spec 136); it is
// persisted in orphaned_worktrees/<repo>/<job_id>.json.
type OrphanedWorktree struct {
	Path     string    `json:"path"`
	Branch   string    `json:"branch,omitempty"`
	AgentID  string    `json:"agent_id"`
	ItemID   string    `json:"item_id"`
	FailedAt time.Time `json:"failed_at"`
	Error    string    `json:"error"`
}

// OrphanFile is the registry of worktrees cleanup could not remove, at
// orphaned_worktrees/<repo>/<job_id>.json (spec 136).
type OrphanFile struct {
	JobID     string             `json:"job_id"`
	Repo      string             `json:"repo"`
	RepoDir   string             `json:"repo_dir"`
	Worktrees []OrphanedWorktree `json:"orphaned_worktrees"`
}

// OrphanRegistry persists a job's orphans as they are found; safe for
// concurrent use.
type OrphanRegistry struct {
	mu   sync.Mutex
	path string
	file OrphanFile
}

// OpenOrphans loads the job's registry (a missing file is an empty one).
// repoDir is recorded so a later cleanup finds the repository.
func OpenOrphans(p Paths, repoDir string) (*OrphanRegistry, error) {
	r := &OrphanRegistry{path: p.Orphans(), file: OrphanFile{JobID: p.JobID, Repo: p.Repo, RepoDir: repoDir}}
	var f OrphanFile
	err := readJSON(r.path, &f)
	switch {
	case err == nil:
		r.file.Worktrees = f.Worktrees
	case errors.Is(err, fs.ErrNotExist):
	default:
		return nil, fmt.Errorf("read the orphan registry: %w", err)
	}
	return r, nil
}

// Add records an orphan (replacing one with the same path) and writes the
// registry atomically.
func (r *OrphanRegistry) Add(o OrphanedWorktree) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, w := range r.file.Worktrees {
		if w.Path == o.Path {
			r.file.Worktrees[i] = o
			return writeJSON(r.path, r.file)
		}
	}
	r.file.Worktrees = append(r.file.Worktrees, o)
	return writeJSON(r.path, r.file)
}

// List returns the recorded orphans, never nil.
func (r *OrphanRegistry) List() []OrphanedWorktree {
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
	return writeJSON(path, f)
}

// OrphanSet is one job's orphan registry.
type OrphanSet struct {
	File string
	OrphanFile
}

// FindOrphans reads the orphan registries under home: one job's, or every
// job's when jobID is "". Registries without worktrees are left out.
func FindOrphans(home, jobID string) ([]OrphanSet, error) {
	pattern := filepath.Join(home, "orphaned_worktrees", "*", "*.json")
	if jobID != "" {
		if err := ValidJobID(jobID); err != nil {
			return nil, err
		}
		pattern = filepath.Join(home, "orphaned_worktrees", "*", jobID+".json")
	}
	files, err := filepath.Glob(pattern)
	if err != nil {
		return nil, fmt.Errorf("list orphan registries: %w", err)
	}
	sort.Strings(files)
	var out []OrphanSet
	for _, f := range files {
		of, err := LoadOrphans(f)
		if err != nil {
			return nil, fmt.Errorf("read orphan registry: %w", err)
		}
		if len(of.Worktrees) > 0 {
			out = append(out, OrphanSet{File: f, OrphanFile: of})
		}
	}
	return out, nil
}
