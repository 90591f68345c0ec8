package worktree_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prodigy-action/prodigy-action/gitops"
	"github.com/prodigy-action/prodigy-action/gitops/gitopstest"
	"github.com/prodigy-action/prodigy-action/jobstore"
	"github.com/prodigy-action/prodigy-action/retry/retrytest"
	"github.com/prodigy-action/prodigy-action/runner/worktree"
)

// record is what a pool reported to its job.
type record struct {
	mu                        sync.Mutex
	created, cleaned, retired []string
	orphans, warnings         []string
}

func (r *record) reporter() worktree.Reporter {
	add := func(s *[]string, v string) { r.mu.Lock(); *s = append(*s, v); r.mu.Unlock() }
	return worktree.Reporter{
		Logf: func(string, ...any) {},
		Warn: func(m string) { add(&r.warnings, m) },
		Created: func(path, agentID, branch string, pool bool) {
			add(&r.created, filepath.Base(path)+"|"+agentID+"|"+branch+"|"+map[bool]string{true: "pool", false: "agent"}[pool])
		},
		Cleaned:      func(agentID, itemID, path string) { add(&r.cleaned, agentID+"|"+itemID) },
		Orphan:       func(path, branch, agentID, itemID string, cause error) { add(&r.orphans, path) },
		Unremovable:  func(dir string, cause error) { add(&r.orphans, dir) },
		RetireBranch: func(b string) { add(&r.retired, b) },
	}
}

// newPool makes a repository, its git client and a pool of it.
func newPool(t *testing.T, fresh bool) (*worktree.Pool, *gitops.Client, *record, string) {
	t.Helper()
	repo := gitopstest.Repo(t, map[string]string{"a.txt": "a\n"})
	git, err := gitops.New(repo, gitops.Options{})
	if err != nil {
		t.Fatal(err)
	}
	head := gitopstest.Out(t, repo, "rev-parse", "HEAD")
	gitopstest.Out(t, repo, "branch", "results")
	paths := jobstore.Paths{Home: t.TempDir(), Repo: "repo", JobID: "job-1"}
	rec := &record{}
	p, err := worktree.New(worktree.Deps{
		Git: git, Paths: paths, ParentDir: paths.ParentWorktree(), Branch: "results", Fresh: fresh,
		Clock: retrytest.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)), Rand: func() float64 { return 0.5 }, Report: rec.reporter(),
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return p, git, rec, head
}

// TestPoolReusesItsSlots: warm slots are handed out, cleaned after the
// attempt (what the agent left is gone), handed out again to the next
// agent on a new branch (the old one retired), and torn down at the end.
func TestPoolReusesItsSlots(t *testing.T) {
	ctx := context.Background()
	p, _, rec, head := newPool(t, false)
	p.Warm(ctx, 2, head)
	t1, err := p.Acquire(ctx, "agent-1", "agent/1", head)
	if err != nil {
		t.Fatal(err)
	}
	if got := gitopstest.Out(t, t1.Path, "branch", "--show-current"); got != "agent/1" {
		t.Fatalf("slot on branch %q, want agent/1", got)
	}
	if err := os.WriteFile(filepath.Join(t1.Path, "left.txt"), []byte("junk"), 0o644); err != nil {
		t.Fatal(err)
	}
	if cs := p.Release(ctx, t1, "agent-1", "item-1", false); cs.Err != nil || cs.Skipped {
		t.Fatalf("release: %+v", cs)
	}
	t2, err := p.Acquire(ctx, "agent-2", "agent/2", head)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(t2.Path, "left.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the next agent sees what the last one left: %v", err)
	}
	if !slices.Contains(rec.retired, "agent/1") || !slices.Contains(rec.cleaned, "agent-1|item-1") {
		t.Errorf("retired %q, cleaned %q", rec.retired, rec.cleaned)
	}
	p.Release(ctx, t2, "agent-2", "item-2", false)
	purge := p.Detach(ctx, true)
	if len(p.Discarded()) == 0 || purge == nil {
		t.Fatalf("a deferred teardown moved nothing aside: %q", p.Discarded())
	}
	purge()
	if d := p.Discarded(); len(d) != 0 {
		t.Errorf("left after the purge: %q", d)
	}
	if len(rec.orphans) != 0 || len(rec.warnings) != 0 {
		t.Errorf("orphans %q, warnings %q", rec.orphans, rec.warnings)
	}
}

// TestFreshWorktreesAreRemovedWithTheirBranch: in fresh isolation every
// attempt gets a worktree of its own, removed with its branch after it;
// a kept one (preserve_failed_worktrees) stays, and the cleanup status
// says which.
func TestFreshWorktreesAreRemovedWithTheirBranch(t *testing.T) {
	ctx := context.Background()
	p, git, rec, head := newPool(t, true)
	p.Warm(ctx, 2, head) // no pool in fresh isolation
	tr, err := p.Acquire(ctx, "agent-1", "agent/1", head)
	if err != nil {
		t.Fatal(err)
	}
	if cs := p.Release(ctx, tr, "agent-1", "item-1", false); cs.Err != nil {
		t.Fatal(cs.Err)
	}
	if _, err := os.Stat(tr.Path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("worktree still there: %v", err)
	}
	if ok, _ := git.BranchExists(ctx, "agent/1"); ok {
		t.Error("its branch is still there")
	}
	kept, err := p.Acquire(ctx, "agent-2", "agent/2", head)
	if err != nil {
		t.Fatal(err)
	}
	if cs := p.Release(ctx, kept, "agent-2", "item-2", true); !cs.Skipped {
		t.Errorf("kept worktree's status %+v, want skipped", cs)
	}
	if _, err := os.Stat(kept.Path); err != nil {
		t.Errorf("kept worktree gone: %v", err)
	}
	for _, c := range rec.created {
		if strings.HasSuffix(c, "|pool") {
			t.Errorf("fresh isolation made a pool slot: %s", c)
		}
	}
}

// TestCleanupStatusJSON: the seed's externally tagged enum, both ways.
func TestCleanupStatusJSON(t *testing.T) {
	for _, c := range []struct {
		s    worktree.CleanupStatus
		json string
	}{
		{worktree.CleanupStatus{}, `"Success"`},
		{worktree.CleanupStatus{Skipped: true}, `"Skipped"`},
		{worktree.CleanupStatus{Err: errors.New("busy")}, `{"Failed":"busy"}`},
	} {
		b, err := json.Marshal(c.s)
		if err != nil || string(b) != c.json {
			t.Errorf("Marshal(%+v) = %s, %v; want %s", c.s, b, err, c.json)
		}
		var back worktree.CleanupStatus
		if err := json.Unmarshal(b, &back); err != nil || back.Skipped != c.s.Skipped || (back.Err == nil) != (c.s.Err == nil) {
			t.Errorf("Unmarshal(%s) = %+v, %v", b, back, err)
		}
	}
	var bad worktree.CleanupStatus
	if err := json.Unmarshal([]byte(`"Maybe"`), &bad); err == nil {
		t.Error(`"Maybe" decoded`)
	}
}
