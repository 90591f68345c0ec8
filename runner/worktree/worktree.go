package worktree

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prodigy-action/prodigy-action/gitops"
	"github.com/prodigy-action/prodigy-action/jobstore"
	"github.com/prodigy-action/prodigy-action/retry"
)

// Tree is the worktree an agent attempt runs in.
type Tree struct {
	Path   string
	Branch string
	slot   *poolSlot // nil in fresh mode
}

// poolSlot is a reusable agent worktree (pool isolation).
type poolSlot struct {
	name   string
	path   string
	branch string // branch currently checked out
}

// CleanupStatus is the cleanup_status of an agent_completed event:
// "Success", "Skipped" or {"Failed": "<error>"} (spec 136).
type CleanupStatus struct {
	Err     error
	Skipped bool
}

// MarshalJSON renders the seed's externally tagged enum.
func (c CleanupStatus) MarshalJSON() ([]byte, error) {
	switch {
	case c.Err != nil:
		return json.Marshal(map[string]string{"Failed": c.Err.Error()})
	case c.Skipped:
		return []byte(`"Skipped"`), nil
	}
	return []byte(`"Success"`), nil
}

// UnmarshalJSON reads what MarshalJSON writes, so event readers can decode
// agent_completed; a failure's text becomes Err.
func (c *CleanupStatus) UnmarshalJSON(b []byte) error {
	var tag string
	if json.Unmarshal(b, &tag) == nil {
		switch tag {
		case "Success":
			*c = CleanupStatus{}
			return nil
		case "Skipped":
			*c = CleanupStatus{Skipped: true}
			return nil
		}
		return fmt.Errorf("unknown cleanup_status %q", tag)
	}
	var failed struct {
		Failed *string `json:"Failed"`
	}
	if err := json.Unmarshal(b, &failed); err != nil || failed.Failed == nil {
		return fmt.Errorf("cleanup_status %s: want \"Success\", \"Skipped\" or {\"Failed\": \"…\"}", b)
	}
	*c = CleanupStatus{Err: errors.New(*failed.Failed)}
	return nil
}

// Pool provides a job's agent worktrees: a pool of max_parallel reused
// worktrees (reset per item, so only changed files are rewritten), or one
// fresh worktree per agent attempt (Deps.Fresh). Every worktree it makes —
// agent worktrees and the parent — is a sparse checkout of the same
// directories when sparse is set (`worktree: {sparse: […]}` or --sparse).
// It is safe for concurrent use.
type Pool struct {
	Deps
	sparse []string // cone-mode directories; empty = full checkout
	// flagSparse is sparse when it came from --sparse (checkpointed, so
	// resume keeps it); nil when the workflow's worktree.sparse applies.
	flagSparse []string

	noticeOnce sync.Once

	mu      sync.Mutex
	ready   *sync.Cond     // on mu: a slot was freed or finished its checkout
	warming int            // slots whose checkout runs in the background
	bg      sync.WaitGroup // those checkouts
	stopBg  context.CancelFunc
	free    []*poolSlot
	all     map[*poolSlot]bool
}

// Reporter is what the pool tells its job: log lines and warnings,
// worktrees made and cleaned (events), worktrees it could not remove (the
// orphan registry) and agent branches to delete when the job ends. Every
// field must be set.
type Reporter struct {
	Logf func(format string, args ...any)
	Warn func(msg string)
	// Created: a worktree was made (pool: a pool slot, not yet an agent's).
	Created func(path, agentID, branch string, pool bool)
	// Cleaned: an agent's worktree was cleaned up after its attempt.
	Cleaned func(agentID, itemID, path string)
	// Orphan: a worktree (and branch) cleanup could not remove.
	Orphan func(path, branch, agentID, itemID string, cause error)
	// Unremovable: the files of a finished pool worktree, already
	// unregistered from git, could not be deleted (it may be called after
	// the job has ended).
	Unremovable  func(dir string, cause error)
	RetireBranch func(branch string)
}

// Deps are the pool's dependencies, fixed when it is built.
type Deps struct {
	Git       *gitops.Client
	Paths     jobstore.Paths
	ParentDir string // the parent worktree (on the results branch)
	Branch    string // the results branch
	// Fresh: one fresh worktree per agent attempt, not a pool of reused
	// ones.
	Fresh bool
	// Sparse is the workflow's worktree.sparse.
	Sparse []string
	// ParentFiles: something runs in, or reads from, the parent worktree
	// (setup or reduce steps, a custom failure handler, worktree merges, a
	// map input command or relative path); without it the parent is made
	// without a checkout.
	ParentFiles bool
	Clock       retry.Clock // cleanup retries
	Rand        func() float64
	Report      Reporter
}

// New returns a job's worktree pool. sparse, the --sparse directories,
// replaces the workflow's worktree.sparse when not empty.
func New(d Deps, sparse []string) (*Pool, error) {
	w := &Pool{Deps: d, all: map[*poolSlot]bool{}}
	w.ready = sync.NewCond(&w.mu)
	if len(sparse) > 0 {
		clean, err := gitops.CleanSparse(sparse)
		if err != nil {
			return nil, fmt.Errorf("--sparse: %w", err)
		}
		w.sparse, w.flagSparse = clean, clean
	} else {
		w.sparse = slices.Clone(d.Sparse)
	}
	return w, nil
}

// FlagSparse is the --sparse directories the pool was built with (nil
// when the workflow's worktree.sparse applies), for the checkpoint.
func (w *Pool) FlagSparse() []string { return w.flagSparse }

// checkout is how every worktree of the job is checked out. Pool slots
// get the untracked cache (agents' `git status` rereads only changed
// directories).
func (w *Pool) checkout(pool bool) gitops.CheckoutOptions {
	return gitops.CheckoutOptions{Sparse: w.sparse, UntrackedCache: pool}
}

// notice says once, before the first worktree is made, what agents will
// see: the sparse directories, or — when none are set but the user's
// checkout is sparse — that git copies that checkout's sparse patterns to
// every new worktree (implicit inheritance, made visible).
func (w *Pool) notice(ctx context.Context) {
	w.noticeOnce.Do(func() {
		if len(w.sparse) > 0 {
			w.Report.Logf("worktrees: sparse checkout of %s (plus files at the top level); merges keep every file", strings.Join(w.sparse, ", "))
			return
		}
		sparse, err := w.Git.IsSparse(ctx)
		if err != nil || !sparse {
			return
		}
		w.Report.Warn(fmt.Sprintf("the checkout at %s is a sparse checkout: git copies its sparse patterns to the parent and every agent worktree, so steps see only its cone (merges still keep every file); set `worktree: {sparse: [...]}` in the workflow or pass --sparse to choose the directories explicitly", w.Git.TopLevel()))
	})
}

// CreateParent makes the parent worktree on the results branch at head,
// shaped like the agent worktrees. When nothing of the job reads its files
// (Deps.ParentFiles), only its administrative entry is made: tree merges
// work on objects, so a map-only job never pays for the parent's checkout
// (gitops.SyncWorktree leaves such a worktree as is).
func (w *Pool) CreateParent(ctx context.Context, head string) error {
	w.notice(ctx)
	if !w.ParentFiles {
		return w.Git.WorktreeAddNoCheckout(ctx, w.ParentDir, w.Branch, head)
	}
	return w.Git.WorktreeCreate(ctx, w.ParentDir, w.Branch, head, w.checkout(false))
}

// Warm provides up to n pool worktrees (detached at head) for the map
// phase. It makes their administrative entries first, one after another
// (`worktree add --no-checkout`: quick), and returns; their checkouts then
// run in the background — the first alone, the others after it, at most
// one per CPU at a time — and acquire hands out each slot as soon as it is
// checked out, so the first agent starts after about one checkout rather
// than after all of them. git 2.39's
// worktree commands race with commands that read the worktree list
// (checkout -B, an agent's own git), which is why every administrative
// step is done before any agent runs. A failure is a warning: acquire then
// creates slots lazily.
func (w *Pool) Warm(ctx context.Context, n int, head string) {
	if w.Fresh {
		return
	}
	w.notice(ctx)
	w.mu.Lock()
	have := len(w.all) + w.warming
	w.mu.Unlock()
	var made []*poolSlot
	for i := have; i < n; i++ {
		name := "pool-" + slotID()
		path := w.Paths.AgentWorktree(name)
		if err := w.Git.WorktreeAddNoCheckout(ctx, path, "", head); err != nil {
			w.Report.Warn(fmt.Sprintf("could not create pool worktree %s (%v); agents will create their worktrees as they start", path, err))
			break
		}
		made = append(made, &poolSlot{name: name, path: path})
	}
	bgCtx, stop := context.WithCancel(ctx)
	w.mu.Lock()
	w.warming += len(made)
	prev := w.stopBg
	w.stopBg = func() {
		if prev != nil {
			prev()
		}
		stop()
	}
	w.mu.Unlock()
	ctx = bgCtx
	sem := make(chan struct{}, max(1, runtime.NumCPU()))
	first := make(chan struct{}) // closed when the first slot's checkout ends
	for i, s := range made {
		w.bg.Add(1)
		go func() {
			defer w.bg.Done()
			if i > 0 {
				<-first // the first agent gets a whole checkout's worth of the machine
			}
			sem <- struct{}{}
			err := w.Git.WorktreePopulate(ctx, s.path, w.checkout(true))
			<-sem
			if i == 0 {
				close(first)
			}
			w.mu.Lock()
			w.warming--
			if err == nil {
				w.all[s] = true
				w.free = append(w.free, s)
			}
			w.ready.Broadcast()
			w.mu.Unlock()
			if err != nil && ctx.Err() == nil {
				w.Report.Warn(fmt.Sprintf("could not check out pool worktree %s (%v); agents will create their worktrees as they start", s.path, err))
			}
			if err != nil {
				return
			}
			w.Report.Created(s.path, "", "", true)
		}()
	}
}

// Acquire returns a clean worktree on a new branch at head.
func (w *Pool) Acquire(ctx context.Context, agentID, branch, head string) (*Tree, error) {
	if w.Fresh {
		w.notice(ctx)
		path := w.Paths.AgentWorktree(agentID)
		if err := w.Git.WorktreeCreate(ctx, path, branch, head, w.checkout(false)); err != nil {
			return nil, fmt.Errorf("create worktree %s: %w", path, err)
		}
		w.Report.Created(path, agentID, branch, false)
		return &Tree{Path: path, Branch: branch}, nil
	}
	w.mu.Lock()
	for len(w.free) == 0 && w.warming > 0 {
		w.ready.Wait() // a warm slot is being checked out
	}
	var s *poolSlot
	if n := len(w.free); n > 0 {
		s = w.free[n-1]
		w.free = w.free[:n-1]
	}
	w.mu.Unlock()
	if s != nil {
		old := s.branch
		switchTo := w.Git.SwitchBranch
		if old == "" {
			// Never used since its checkout: clean, and detached at the
			// tip it was made from. When that is still head, only the
			// branch and HEAD are written (no walk of its files: the
			// first agent of a 50,000-file job starts 0.5 s sooner).
			switchTo = w.Git.AttachBranch
		}
		if err := switchTo(ctx, s.path, branch, head); err == nil {
			s.branch = branch
			if old != branch {
				w.Report.RetireBranch(old)
			}
			return &Tree{Path: s.path, Branch: branch, slot: s}, nil
		} else {
			w.Report.Warn(fmt.Sprintf("pool worktree %s could not be reused (%v); replacing it", s.path, err))
			w.retire(ctx, s, agentID, "", err)
		}
	}
	s = &poolSlot{name: "wt-" + agentID}
	s.path = w.Paths.AgentWorktree(s.name)
	if _, err := os.Stat(s.path); err == nil {
		// Left over from a crashed run: remove before reuse.
		_ = w.Git.WorktreeRemove(ctx, s.path)
	}
	w.notice(ctx)
	if err := w.Git.WorktreeCreate(ctx, s.path, branch, head, w.checkout(true)); err != nil {
		return nil, fmt.Errorf("create worktree %s: %w", s.path, err)
	}
	s.branch = branch
	w.mu.Lock()
	w.all[s] = true
	w.mu.Unlock()
	w.Report.Created(s.path, agentID, branch, false)
	return &Tree{Path: s.path, Branch: branch, slot: s}, nil
}

// Reset prepares an item's worktree for another attempt: its branch is
// moved to head and every change and untracked file is dropped.
func (w *Pool) Reset(ctx context.Context, t *Tree, head string) error {
	return w.Git.ResetWorktree(ctx, t.Path, t.Branch, head)
}

// Release cleans up after an agent attempt. keep preserves the worktree
// and branch as they are (preserve_failed_worktrees). Cleanup failures are
// warnings: the worktree is recorded as an orphan and the item's outcome
// is not affected (spec 136).
func (w *Pool) Release(ctx context.Context, t *Tree, agentID, itemID string, keep bool) CleanupStatus {
	if t == nil {
		return CleanupStatus{Skipped: true}
	}
	if keep {
		if t.slot != nil {
			w.mu.Lock()
			delete(w.all, t.slot)
			w.mu.Unlock()
		}
		return CleanupStatus{Skipped: true}
	}
	err := w.cleanupRetry(ctx, func(ctx context.Context) error {
		if t.slot != nil {
			return w.Git.CleanWorktree(ctx, t.Path)
		}
		if err := w.Git.WorktreeRemove(ctx, t.Path); err != nil {
			return err
		}
		return w.Git.DeleteBranch(ctx, t.Branch)
	})
	if err == nil {
		if t.slot != nil {
			w.mu.Lock()
			w.free = append(w.free, t.slot)
			w.ready.Broadcast() // an agent may be waiting for a slot
			w.mu.Unlock()
		}
		w.Report.Cleaned(agentID, itemID, t.Path)
		return CleanupStatus{}
	}
	if t.slot != nil {
		w.retire(ctx, t.slot, agentID, itemID, err)
	} else {
		w.Report.Orphan(t.Path, t.Branch, agentID, itemID, err)
	}
	return CleanupStatus{Err: err}
}

// retire drops a broken pool slot: it is recorded as an orphan.
func (w *Pool) retire(ctx context.Context, s *poolSlot, agentID, itemID string, cause error) {
	w.mu.Lock()
	delete(w.all, s)
	w.mu.Unlock()
	if err := w.Git.WorktreeRemove(ctx, s.path); err == nil {
		w.Report.RetireBranch(s.branch)
		return
	}
	w.Report.Orphan(s.path, s.branch, agentID, itemID, cause)
}

// Close removes the pool's worktrees and deletes their files (detach
// without deferring).
func (w *Pool) Close(ctx context.Context) { w.Detach(ctx, false) }

// discardedPrefix names the directories of pool worktrees moved aside for
// a deferred deletion, next to the slots.
const discardedPrefix = ".discarded-"

// Detach removes the pool's worktrees from the repository at the end of a
// job, concurrently. Without deferFiles their files are deleted here,
// outside git's administrative lock (gitops.WorktreeDiscard), so teardown
// costs about one worktree's deletion rather than P of them one after
// another, and it returns nil. With deferFiles each slot directory is only
// moved aside (gitops.WorktreeDetach: one rename, to .discarded-<name> next
// to it) and unregistered from git, and the returned function deletes them
// concurrently; it is nil when there is nothing to delete. Either way the
// .discarded-* directories a crashed run left go too.
func (w *Pool) Detach(ctx context.Context, deferFiles bool) func() {
	w.mu.Lock()
	if w.stopBg != nil {
		w.stopBg() // checkouts no agent will use: stop them (their worktrees are removed)
	}
	w.mu.Unlock()
	w.bg.Wait()
	w.mu.Lock()
	slots := make([]*poolSlot, 0, len(w.all))
	for s := range w.all {
		slots = append(slots, s)
	}
	w.all = map[*poolSlot]bool{}
	w.free = nil
	w.mu.Unlock()
	var wg sync.WaitGroup
	for _, s := range slots {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := w.cleanupRetry(ctx, func(ctx context.Context) error {
				if !deferFiles {
					return w.Git.WorktreeDiscard(ctx, s.path)
				}
				_, err := w.Git.WorktreeDetach(ctx, s.path, filepath.Join(filepath.Dir(s.path), discardedPrefix+filepath.Base(s.path)))
				return err
			})
			if err != nil {
				w.Report.Orphan(s.path, s.branch, "", "", err)
				return
			}
			w.Report.RetireBranch(s.branch)
		}()
	}
	wg.Wait()
	aside := w.Discarded()
	if len(aside) == 0 {
		return nil
	}
	if !deferFiles {
		w.RemoveDiscarded(aside)
		return nil
	}
	return sync.OnceFunc(func() { w.RemoveDiscarded(aside) })
}

// cleanupRetry retries a cleanup action briefly (spec 136: transient
// "directory not empty" and similar).
func (w *Pool) cleanupRetry(ctx context.Context, fn func(context.Context) error) error {
	pol := retry.Policy{Attempts: 3, Backoff: retry.Exponential(100*time.Millisecond, 2), MaxDelay: time.Second}
	return retry.Do(ctx, pol, retry.Options{Clock: w.Clock, Rand: w.Rand}, func(ctx context.Context, _ int) error { return fn(ctx) })
}

// Discarded lists the pool worktrees moved aside in the job's worktree
// directory (.discarded-*): by this run's detach, or by a run killed before
// it deleted them.
func (w *Pool) Discarded() []string {
	dirs, _ := filepath.Glob(filepath.Join(w.Paths.WorktreeRoot(), discardedPrefix+"*"))
	return dirs
}

// RemoveDiscarded deletes dirs (see discarded) concurrently; what cannot be
// deleted goes to the orphan registry.
func (w *Pool) RemoveDiscarded(dirs []string) {
	var wg sync.WaitGroup
	for _, d := range dirs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := gitops.RemoveDetached(d); err != nil {
				w.Report.Unremovable(d, err)
			}
		}()
	}
	wg.Wait()
}

// slotID is a random name for a pool slot: 8 hex digits.
func slotID() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
