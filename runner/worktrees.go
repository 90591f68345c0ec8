package runner

import (
	"context"
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

	"github.com/prodigy-action/prodigy-action/config"
	"github.com/prodigy-action/prodigy-action/gitops"
	"github.com/prodigy-action/prodigy-action/retry"
)

// agentTree is the worktree an agent attempt runs in.
type agentTree struct {
	path   string
	branch string
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

// worktrees provides agent worktrees: a pool of max_parallel reused
// worktrees (reset per item, so only changed files are rewritten), or one
// fresh worktree per agent attempt. Every worktree it makes — agent
// worktrees and the parent — is a sparse checkout of the same directories
// when sparse is set (`worktree: {sparse: […]}` or --sparse).
type worktrees struct {
	worktreeDeps
	mode   Isolation
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

// worktreeJob is what the worktree provider tells its job: log lines and
// warnings, events, worktrees it could not remove (orphan registry) and
// agent branches to delete when the job ends. *job implements it.
type worktreeJob interface {
	logf(format string, args ...any)
	warn(msg string)
	emit(Event)
	orphan(path, branch, agentID, itemID string, cause error)
	unremovable(dir string, cause error)
	retireBranch(b string)
}

// worktreeDeps are the worktree provider's dependencies, fixed when it is
// built.
type worktreeDeps struct {
	git       *gitops.Client
	paths     Paths
	parentDir string // the parent worktree (on the results branch)
	branch    string // the results branch
	wf        *config.Workflow
	isolation Isolation
	mergeMode MergeMode
	clock     retry.Clock // cleanup retries
	rand      func() float64
	job       worktreeJob
}

// newWorktrees returns a job's worktree provider. sparse, the --sparse
// directories, replaces the workflow's worktree.sparse when not empty.
func newWorktrees(d worktreeDeps, sparse []string) (*worktrees, error) {
	w := &worktrees{worktreeDeps: d, mode: d.isolation, all: map[*poolSlot]bool{}}
	w.ready = sync.NewCond(&w.mu)
	if len(sparse) > 0 {
		clean, err := gitops.CleanSparse(sparse)
		if err != nil {
			return nil, fmt.Errorf("--sparse: %w", err)
		}
		w.sparse, w.flagSparse = clean, clean
	} else if d.wf != nil {
		w.sparse = slices.Clone(d.wf.Worktree.Sparse)
	}
	return w, nil
}

// checkout is how every worktree of the job is checked out. Pool slots
// get the untracked cache (agents' `git status` rereads only changed
// directories).
func (w *worktrees) checkout(pool bool) gitops.CheckoutOptions {
	return gitops.CheckoutOptions{Sparse: w.sparse, UntrackedCache: pool}
}

// notice says once, before the first worktree is made, what agents will
// see: the sparse directories, or — when none are set but the user's
// checkout is sparse — that git copies that checkout's sparse patterns to
// every new worktree (implicit inheritance, made visible).
func (w *worktrees) notice(ctx context.Context) {
	w.noticeOnce.Do(func() {
		if len(w.sparse) > 0 {
			w.job.logf("worktrees: sparse checkout of %s (plus files at the top level); merges keep every file", strings.Join(w.sparse, ", "))
			return
		}
		sparse, err := w.git.IsSparse(ctx)
		if err != nil || !sparse {
			return
		}
		w.job.warn(fmt.Sprintf("the checkout at %s is a sparse checkout: git copies its sparse patterns to the parent and every agent worktree, so steps see only its cone (merges still keep every file); set `worktree: {sparse: [...]}` in the workflow or pass --sparse to choose the directories explicitly", w.git.TopLevel()))
	})
}

// createParent makes the parent worktree on the results branch at head,
// shaped like the agent worktrees. When nothing of the job reads its files
// (parentNeedsFiles), only its administrative entry is made: tree merges
// work on objects, so a map-only job never pays for the parent's checkout
// (gitops.SyncWorktree leaves such a worktree as is).
func (w *worktrees) createParent(ctx context.Context, head string) error {
	w.notice(ctx)
	if !w.parentNeedsFiles() {
		return w.git.WorktreeAddNoCheckout(ctx, w.parentDir, w.branch, head)
	}
	return w.git.WorktreeCreate(ctx, w.parentDir, w.branch, head, w.checkout(false))
}

// parentNeedsFiles reports whether anything runs in, or reads from, the
// parent worktree: setup or reduce steps, a custom on_item_failure handler,
// --merge worktree, or a map input that is a command or a relative path.
func (w *worktrees) parentNeedsFiles() bool {
	wf := w.wf
	if len(wf.Setup) > 0 || len(wf.Reduce) > 0 || len(wf.ErrorPolicy.CustomHandler) > 0 || w.mergeMode != MergeTree {
		return true
	}
	in := wf.Map.Input
	return !filepath.IsAbs(in) || strings.ContainsAny(in, " \t|;&$<>(){}`'\"\\")
}

// warm provides up to n pool worktrees (detached at head) for the map
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
func (w *worktrees) warm(ctx context.Context, n int, head string) {
	if w.mode != IsolationPool {
		return
	}
	w.notice(ctx)
	w.mu.Lock()
	have := len(w.all) + w.warming
	w.mu.Unlock()
	var made []*poolSlot
	for i := have; i < n; i++ {
		name := "pool-" + newUUID()[:8]
		path := w.paths.AgentWorktree(name)
		if err := w.git.WorktreeAddNoCheckout(ctx, path, "", head); err != nil {
			w.job.warn(fmt.Sprintf("could not create pool worktree %s (%v); agents will create their worktrees as they start", path, err))
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
			err := w.git.WorktreePopulate(ctx, s.path, w.checkout(true))
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
				w.job.warn(fmt.Sprintf("could not check out pool worktree %s (%v); agents will create their worktrees as they start", s.path, err))
			}
			if err != nil {
				return
			}
			w.job.emit(WorktreeCreated{Path: s.path, Pool: true})
		}()
	}
}

// acquire returns a clean worktree on a new branch at head.
func (w *worktrees) acquire(ctx context.Context, agentID, branch, head string) (*agentTree, error) {
	if w.mode == IsolationFresh {
		w.notice(ctx)
		path := w.paths.AgentWorktree(agentID)
		if err := w.git.WorktreeCreate(ctx, path, branch, head, w.checkout(false)); err != nil {
			return nil, fmt.Errorf("create worktree %s: %w", path, err)
		}
		w.job.emit(WorktreeCreated{AgentID: agentID, Path: path, Branch: branch})
		return &agentTree{path: path, branch: branch}, nil
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
		switchTo := w.git.SwitchBranch
		if old == "" {
			// Never used since its checkout: clean, and detached at the
			// tip it was made from. When that is still head, only the
			// branch and HEAD are written (no walk of its files: the
			// first agent of a 50,000-file job starts 0.5 s sooner).
			switchTo = w.git.AttachBranch
		}
		if err := switchTo(ctx, s.path, branch, head); err == nil {
			s.branch = branch
			if old != branch {
				w.job.retireBranch(old)
			}
			return &agentTree{path: s.path, branch: branch, slot: s}, nil
		} else {
			w.job.warn(fmt.Sprintf("pool worktree %s could not be reused (%v); replacing it", s.path, err))
			w.retire(ctx, s, agentID, "", err)
		}
	}
	s = &poolSlot{name: "wt-" + agentID}
	s.path = w.paths.AgentWorktree(s.name)
	if _, err := os.Stat(s.path); err == nil {
		// Left over from a crashed run: remove before reuse.
		_ = w.git.WorktreeRemove(ctx, s.path)
	}
	w.notice(ctx)
	if err := w.git.WorktreeCreate(ctx, s.path, branch, head, w.checkout(true)); err != nil {
		return nil, fmt.Errorf("create worktree %s: %w", s.path, err)
	}
	s.branch = branch
	w.mu.Lock()
	w.all[s] = true
	w.mu.Unlock()
	w.job.emit(WorktreeCreated{AgentID: agentID, Path: s.path, Branch: branch})
	return &agentTree{path: s.path, branch: branch, slot: s}, nil
}

// reset prepares an item's worktree for another attempt: its branch is
// moved to head and every change and untracked file is dropped.
func (w *worktrees) reset(ctx context.Context, t *agentTree, head string) error {
	return w.git.ResetWorktree(ctx, t.path, t.branch, head)
}

// release cleans up after an agent attempt. keep preserves the worktree
// and branch as they are (preserve_failed_worktrees). Cleanup failures are
// warnings: the worktree is recorded as an orphan and the item's outcome
// is not affected (spec 136).
func (w *worktrees) release(ctx context.Context, t *agentTree, agentID, itemID string, keep bool) CleanupStatus {
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
			return w.git.CleanWorktree(ctx, t.path)
		}
		if err := w.git.WorktreeRemove(ctx, t.path); err != nil {
			return err
		}
		return w.git.DeleteBranch(ctx, t.branch)
	})
	if err == nil {
		if t.slot != nil {
			w.mu.Lock()
			w.free = append(w.free, t.slot)
			w.ready.Broadcast() // an agent may be waiting for a slot
			w.mu.Unlock()
		}
		w.job.emit(WorktreeCleaned{AgentID: agentID, ItemID: itemID, Path: t.path})
		return CleanupStatus{}
	}
	if t.slot != nil {
		w.retire(ctx, t.slot, agentID, itemID, err)
	} else {
		w.job.orphan(t.path, t.branch, agentID, itemID, err)
	}
	return CleanupStatus{Err: err}
}

// retire drops a broken pool slot: it is recorded as an orphan.
func (w *worktrees) retire(ctx context.Context, s *poolSlot, agentID, itemID string, cause error) {
	w.mu.Lock()
	delete(w.all, s)
	w.mu.Unlock()
	if err := w.git.WorktreeRemove(ctx, s.path); err == nil {
		w.job.retireBranch(s.branch)
		return
	}
	w.job.orphan(s.path, s.branch, agentID, itemID, cause)
}

// close removes the pool's worktrees and deletes their files (detach
// without deferring).
func (w *worktrees) close(ctx context.Context) { w.detach(ctx, false) }

// discardedPrefix names the directories of pool worktrees moved aside for
// a deferred deletion, next to the slots.
const discardedPrefix = ".discarded-"

// detach removes the pool's worktrees from the repository at the end of a
// job, concurrently. Without deferFiles their files are deleted here,
// outside git's administrative lock (gitops.WorktreeDiscard), so teardown
// costs about one worktree's deletion rather than P of them one after
// another, and it returns nil. With deferFiles each slot directory is only
// moved aside (gitops.WorktreeDetach: one rename, to .discarded-<name> next
// to it) and unregistered from git, and the returned function deletes them
// concurrently; it is nil when there is nothing to delete. Either way the
// .discarded-* directories a crashed run left go too.
func (w *worktrees) detach(ctx context.Context, deferFiles bool) func() {
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
					return w.git.WorktreeDiscard(ctx, s.path)
				}
				_, err := w.git.WorktreeDetach(ctx, s.path, filepath.Join(filepath.Dir(s.path), discardedPrefix+filepath.Base(s.path)))
				return err
			})
			if err != nil {
				w.job.orphan(s.path, s.branch, "", "", err)
				return
			}
			w.job.retireBranch(s.branch)
		}()
	}
	wg.Wait()
	aside := w.discarded()
	if len(aside) == 0 {
		return nil
	}
	if !deferFiles {
		w.removeDiscarded(aside)
		return nil
	}
	return sync.OnceFunc(func() { w.removeDiscarded(aside) })
}

// cleanupRetry retries a cleanup action briefly (spec 136: transient
// "directory not empty" and similar).
func (w *worktrees) cleanupRetry(ctx context.Context, fn func(context.Context) error) error {
	pol := retry.Policy{Attempts: 3, Backoff: retry.Exponential(100*time.Millisecond, 2), MaxDelay: time.Second}
	return retry.Do(ctx, pol, retry.Options{Clock: w.clock, Rand: w.rand}, func(ctx context.Context, _ int) error { return fn(ctx) })
}

// orphan records a worktree cleanup could not remove and warns about it
// with the agent, item, path and error.
func (j *job) orphan(path, branch, agentID, itemID string, cause error) {
	j.warn(fmt.Sprintf("cleanup failed for agent %s (item %s) at %s: %v — the item's outcome is unaffected; remove it later with `prodigy-action worktree clean-orphaned %s`",
		orDash(agentID), orDash(itemID), path, cause, j.id))
	o := OrphanedWorktree{Path: path, Branch: branch, AgentID: agentID, ItemID: itemID, FailedAt: j.now().UTC(), Error: cause.Error()}
	if err := j.orphans.Add(o); err != nil {
		j.warn(fmt.Sprintf("could not record orphaned worktree %s: %v", path, err))
	}
	j.events.emit(WorktreeCleanupFailed{AgentID: agentID, ItemID: itemID, Path: path, Error: cause.Error()})
}

// unremovable records a finished pool worktree's directory, already
// unregistered from git, whose files could not be deleted: it goes to the
// orphan registry (`worktree clean-orphaned` removes it) with a warning.
// Unlike orphan it emits no event: it may run after the job has ended.
func (j *job) unremovable(dir string, cause error) {
	j.warn(fmt.Sprintf("could not delete the files of a finished pool worktree at %s: %v — remove them with `prodigy-action worktree clean-orphaned %s`", dir, cause, j.id))
	if err := j.orphans.Add(OrphanedWorktree{Path: dir, FailedAt: j.now().UTC(), Error: cause.Error()}); err != nil {
		j.warn(fmt.Sprintf("could not record orphaned worktree %s: %v", dir, err))
	}
}

// discarded lists the pool worktrees moved aside in the job's worktree
// directory (.discarded-*): by this run's detach, or by a run killed before
// it deleted them.
func (w *worktrees) discarded() []string {
	dirs, _ := filepath.Glob(filepath.Join(w.paths.WorktreeRoot(), discardedPrefix+"*"))
	return dirs
}

// removeDiscarded deletes dirs (see discarded) concurrently; what cannot be
// deleted goes to the orphan registry.
func (w *worktrees) removeDiscarded(dirs []string) {
	var wg sync.WaitGroup
	for _, d := range dirs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := gitops.RemoveDetached(d); err != nil {
				w.job.unremovable(d, err)
			}
		}()
	}
	wg.Wait()
}

// emit records an event of the job (worktreeJob).
func (j *job) emit(e Event) { j.events.emit(e) }

// retireBranch schedules an agent branch for deletion when the job ends.
func (j *job) retireBranch(b string) {
	if b == "" {
		return
	}
	j.deadMu.Lock()
	j.deadBranches = append(j.deadBranches, b)
	j.deadMu.Unlock()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
