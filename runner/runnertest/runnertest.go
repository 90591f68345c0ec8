// Package runnertest holds what the tests of the engine and of the
// packages built on it (shard) share: a real git repository with one
// commit in a temporary directory, with a state directory of its own; a
// recorder of the engine's hooks; a buffer safe for concurrent writes; a
// full file system. Only tests import it.
package runnertest

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/prodigy-action/prodigy-action/config"
	"github.com/prodigy-action/prodigy-action/dlq"
	"github.com/prodigy-action/prodigy-action/gitops/gitopstest"
	"github.com/prodigy-action/prodigy-action/jobstore"
	"github.com/prodigy-action/prodigy-action/runner"
)

// Repo is a real git repository (Dir, on branch main) and a state
// directory (Home) for the engine, both under the test's temporary
// directory.
type Repo struct {
	T    *testing.T
	Dir  string
	Home string
}

// NewRepo makes a repository holding files (path → content; directories
// are made; a README.md is added when files has none) in one commit.
func NewRepo(t *testing.T, files map[string]string) *Repo {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "repo")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	r := &Repo{T: t, Dir: dir, Home: filepath.Join(t.TempDir(), "home")}
	r.Git("init", "-q", "-b", "main")
	if files == nil {
		files = map[string]string{}
	}
	if _, ok := files["README.md"]; !ok {
		files["README.md"] = "test repo\n"
	}
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r.Git("add", ".")
	r.Git("-c", "user.name=test", "-c", "user.email=test@example.invalid", "commit", "-q", "-m", "initial")
	return r
}

// Git runs git in the repository and returns its trimmed output; a
// failure fails the test (gitopstest.Out: only gitops starts git).
func (r *Repo) Git(args ...string) string {
	r.T.Helper()
	return gitopstest.Out(r.T, r.Dir, args...)
}

// Workflow writes yaml as a workflow file next to (not inside) the
// repository and loads it.
func (r *Repo) Workflow(yaml string) *config.Workflow {
	r.T.Helper()
	path := filepath.Join(filepath.Dir(r.Dir), "workflow.yml")
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		r.T.Fatal(err)
	}
	wf, err := config.Load(path)
	if err != nil {
		r.T.Fatalf("load workflow: %v", err)
	}
	return wf
}

// Clone makes a full (--no-local) clone of the repository, named name,
// with a state directory of its own.
func (r *Repo) Clone(name string) *Repo {
	r.T.Helper()
	dir := filepath.Join(r.T.TempDir(), name)
	r.Git("clone", "-q", "--no-local", r.Dir, dir)
	return &Repo{T: r.T, Dir: dir, Home: filepath.Join(r.T.TempDir(), "home")}
}

// DLQRecords reads every DLQ record of job jobID, by item id.
func (r *Repo) DLQRecords(jobID string) map[string]dlq.DeadLetteredItem {
	r.T.Helper()
	store, err := dlq.Open(jobstore.Paths{Home: r.Home, Repo: filepath.Base(r.Dir), JobID: jobID}.DLQRoot(), jobID, dlq.Options{})
	if err != nil {
		r.T.Fatal(err)
	}
	defer store.Close()
	out := map[string]dlq.DeadLetteredItem{}
	if err := store.Each(func(it dlq.DeadLetteredItem) error { out[it.ItemID] = it; return nil }); err != nil {
		r.T.Fatal(err)
	}
	return out
}

// Files lists the files of a revision (nil when it has none).
func (r *Repo) Files(rev string) []string {
	out := r.Git("ls-tree", "-r", "--name-only", rev)
	if out == "" {
		return nil
	}
	return strings.Split(out, "\n")
}

// AssertUntouched checks the user's checkout: still on main at head,
// clean.
func (r *Repo) AssertUntouched(head string) {
	r.T.Helper()
	if got := r.Git("rev-parse", "HEAD"); got != head {
		r.T.Errorf("user's HEAD moved: %s -> %s", head, got)
	}
	if got := r.Git("rev-parse", "--abbrev-ref", "HEAD"); got != "main" {
		r.T.Errorf("user's branch changed to %s", got)
	}
	if got := r.Git("status", "--porcelain"); got != "" {
		r.T.Errorf("user's checkout is dirty:\n%s", got)
	}
}

// CountWorkflow is a workflow over items.json whose setup commits a file,
// whose items each commit f<index>.txt (two at a time) and whose reduce
// commits count.txt, the number of those files.
const CountWorkflow = `
name: ok
mode: mapreduce
setup:
  - shell: echo s > setup.txt && git add -A && git commit -qm setup
map:
  input: items.json
  max_parallel: 2
  agent_template:
    - shell: echo "$PRODIGY_ITEM_INDEX" > "f$PRODIGY_ITEM_INDEX.txt" && git add -A && git commit -qm "item $PRODIGY_ITEM_INDEX"
reduce:
  - shell: ls f*.txt | wc -l > count.txt && git add -A && git commit -qm reduce
`

// HookLog is a runner.Hooks that records the warnings it is told and
// counts finished items. OnItem, when set before the job starts, is called
// after each finished item with the number finished so far.
type HookLog struct {
	OnItem func(n int)

	mu       sync.Mutex
	finished int
	warnings []string
}

// ItemFinished counts the item and calls OnItem.
func (h *HookLog) ItemFinished(runner.ItemOutcome, string) {
	h.mu.Lock()
	h.finished++
	n := h.finished
	f := h.OnItem
	h.mu.Unlock()
	if f != nil {
		f(n)
	}
}

// Warning records msg.
func (h *HookLog) Warning(msg string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.warnings = append(h.warnings, msg)
}

// Warnings are the warnings so far.
func (h *HookLog) Warnings() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.warnings)
}

// SyncBuffer is a bytes.Buffer safe for concurrent use.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns what was written.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// MountTmpfs mounts a tmpfs of size (mount's size=, e.g. "64k") owned by
// the test's user at dir (made when missing), as root or through
// passwordless sudo; the test is skipped where neither is allowed. It is
// unmounted when the test ends.
func MountTmpfs(t *testing.T, dir, size string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var sudo []string
	if os.Geteuid() != 0 {
		sudo = []string{"sudo", "-n"}
	}
	command := func(args ...string) *exec.Cmd {
		args = append(slices.Clone(sudo), args...)
		return exec.Command(args[0], args[1:]...)
	}
	opts := fmt.Sprintf("size=%s,uid=%d,gid=%d,mode=0755", size, os.Geteuid(), os.Getegid())
	if out, err := command("mount", "-t", "tmpfs", "-o", opts, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs (needs root or sudo): %v %s", err, out)
	}
	t.Cleanup(func() { _ = command("umount", "-l", dir).Run() })
}

// MountFullTmpfs mounts a 64 KiB tmpfs at dir (MountTmpfs) and fills it,
// so every write there fails with ENOSPC; free empties it again.
func MountFullTmpfs(t *testing.T, dir string) (free func()) {
	t.Helper()
	MountTmpfs(t, dir, "64k")
	filler := filepath.Join(dir, "filler")
	f, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	for {
		if _, err := f.Write(buf); err != nil {
			break
		}
	}
	_ = f.Close()
	return func() {
		if err := os.Remove(filler); err != nil {
			t.Fatal(err)
		}
	}
}
