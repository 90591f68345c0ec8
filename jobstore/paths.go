package jobstore

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
)

// Paths is the on-disk layout of one job under the state directory
// (DESIGN.md "State on disk"). Repo is the repository's state name
// (RepoKey decides it).
type Paths struct {
	Home  string
	Repo  string
	JobID string
}

// JobStateDir holds checkpoint.json, the workflow copy and the job lock.
func (p Paths) JobStateDir() string { return filepath.Join(p.Home, "state", p.Repo, "jobs", p.JobID) }

// Checkpoint is the resumable job state.
func (p Paths) Checkpoint() string { return filepath.Join(p.JobStateDir(), "checkpoint.json") }

// CheckpointJournal holds the item changes made since checkpoint.json was
// written, one JSON line each.
func (p Paths) CheckpointJournal() string {
	return filepath.Join(p.JobStateDir(), "checkpoint.journal")
}

// ItemData holds the JSON value of every item of the job, one per line,
// written once; the checkpoint's items point into it.
func (p Paths) ItemData() string { return filepath.Join(p.JobStateDir(), "items.jsonl") }

// WorkflowCopy is the workflow file as it was when the job started.
func (p Paths) WorkflowCopy() string { return filepath.Join(p.JobStateDir(), "workflow.yml") }

// Lock serialises processes working on the same job.
func (p Paths) Lock() string { return filepath.Join(p.JobStateDir(), "job.lock") }

// Events is the job's event log (one JSON object per line).
func (p Paths) Events() string {
	return filepath.Join(p.Home, "events", p.Repo, p.JobID, "events.jsonl")
}

// Session is the session file of the seeds.
func (p Paths) Session() string { return filepath.Join(p.Home, "sessions", SessionID(p.JobID)+".json") }

// WorktreeRoot holds the parent and agent worktrees of the job.
func (p Paths) WorktreeRoot() string { return filepath.Join(p.Home, "worktrees", p.Repo, p.JobID) }

// ParentWorktree is where setup and reduce run.
func (p Paths) ParentWorktree() string { return filepath.Join(p.WorktreeRoot(), "parent") }

// AgentWorktree is the worktree of one agent slot or agent.
func (p Paths) AgentWorktree(name string) string { return filepath.Join(p.WorktreeRoot(), name) }

// Orphans is the registry of worktrees cleanup could not remove.
func (p Paths) Orphans() string {
	return filepath.Join(p.Home, "orphaned_worktrees", p.Repo, p.JobID+".json")
}

// LogsDir holds the claude transcripts of every item of the job.
func (p Paths) LogsDir() string { return filepath.Join(p.Home, "logs", p.Repo, p.JobID) }

// Logs is the directory of one item's claude transcripts.
func (p Paths) Logs(itemID string) string { return filepath.Join(p.LogsDir(), SafeName(itemID)) }

// DLQRoot is the folder that belongs to the job's dead letter queue; the
// dlq package keeps its records inside it (dlq.Open takes this path).
func (p Paths) DLQRoot() string { return filepath.Join(p.Home, "dlq", p.Repo, p.JobID) }

// SessionID is the id of a job's session file.
func SessionID(jobID string) string { return "session-" + jobID }

var unsafeChars = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// SafeName maps any string to a single path element that cannot escape its
// directory: readable when the input is tame, hashed when it is not.
func SafeName(s string) string {
	clean := unsafeChars.ReplaceAllString(s, "_")
	clean = strings.Trim(clean, ".")
	if clean == s && clean != "" && len(clean) <= 100 {
		return clean
	}
	sum := sha256.Sum256([]byte(s))
	if len(clean) > 60 {
		clean = clean[:60]
	}
	if clean == "" {
		clean = "item"
	}
	return fmt.Sprintf("%s-%s", clean, hex.EncodeToString(sum[:6]))
}

// ErrInvalidJobID is wrapped by ValidJobID's errors.
var ErrInvalidJobID = errors.New("invalid job id")

var jobIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// ValidJobID reports whether id is usable as a job id: it becomes a path
// element and part of a git branch name. Latest is reserved: it names the
// newest job in lookups.
func ValidJobID(id string) error {
	if !jobIDPattern.MatchString(id) || strings.Contains(id, "..") || strings.HasSuffix(id, ".lock") {
		return fmt.Errorf("%w %q: use letters, digits, '.', '_' and '-' (at most 128, no '..')", ErrInvalidJobID, id)
	}
	if id == Latest {
		return fmt.Errorf("%w %q: it is reserved for the newest job", ErrInvalidJobID, id)
	}
	return nil
}

// repoIdentity is the identity of the repository checked out at topLevel:
// its absolute, symlink-free path.
func repoIdentity(topLevel string) string {
	path, err := filepath.Abs(topLevel)
	if err != nil {
		return filepath.Clean(topLevel)
	}
	if real, err := filepath.EvalSymlinks(path); err == nil {
		path = real
	}
	return filepath.Clean(path)
}

// RepoKey decides the <repo> element of the paths of the repository
// checked out at topLevel (suffix, such as ".shard-3", names a variant of
// its state). It is the checkout's directory name — readable, and where
// earlier versions kept every job, so existing state stays readable — as
// long as that name is free or this repository's: the name belongs to the
// repository its jobs' checkpoints name (state/<name>/jobs/*). Any other
// repository with the same directory name gets <name>-<digest of its
// absolute, symlink-free path>, so two repositories named `app` never
// share jobs. Nothing is written: a name is taken by the first job's
// checkpoint.
func RepoKey(home, topLevel, suffix string) string {
	name := filepath.Base(topLevel)
	if home == "" {
		return name + suffix
	}
	id := repoIdentity(topLevel)
	if owner := nameOwner(home, name); owner == "" || owner == id {
		return name + suffix
	}
	sum := sha256.Sum256([]byte(id))
	return name + "-" + hex.EncodeToString(sum[:5]) + suffix
}

// nameOwner is the identity of the repository whose jobs are kept under
// state name name ("" when there are none): the first readable
// checkpoint's repository.
func nameOwner(home, name string) string {
	dirs, _ := filepath.Glob(filepath.Join(home, "state", name, "jobs", "*"))
	for _, d := range dirs {
		if cp, err := LoadSummary(Paths{Home: home, Repo: name, JobID: filepath.Base(d)}); err == nil && cp.RepoDir != "" {
			return repoIdentity(cp.RepoDir)
		}
	}
	return ""
}
