package gitops

import (
	"fmt"
	"path/filepath"
	"runtime"
	"testing"
)

// TestMergeTreeWalkDoesNotGrowWithTheJob: agents based on a tip that has
// since moved (the usual case at max_parallel ≥ 2) must not make the
// ancestry check walk back through every earlier merge of the job. Each
// merge's walk visits the agent's own commits only, however many merges
// came before; a Client that knows nothing about the earlier merges walks
// the whole history.
func TestMergeTreeWalkDoesNotGrowWithTheJob(t *testing.T) {
	t.Parallel()
	dir, c := newRepo(t, nil, true)
	git(t, dir, "branch", "results")
	scratch := filepath.Join(t.TempDir(), "scratch")
	git(t, dir, "worktree", "add", "-q", "--detach", scratch, "results")
	var tips []string // tips of results, oldest first
	tips = append(tips, git(t, dir, "rev-parse", "results"))
	const merges = 40
	for i := range merges {
		// Agent i starts from the tip two merges back: stale by one merge.
		base := tips[max(0, len(tips)-2)]
		git(t, scratch, "checkout", "-q", "-B", fmt.Sprintf("agent-%d", i), base)
		commitFiles(t, scratch, fmt.Sprintf("item %d", i), map[string]string{fmt.Sprintf("out/%d.txt", i): "x"})
		before := c.objects.walked.Load()
		tip, err := c.MergeTree(bg(), "results", fmt.Sprintf("agent-%d", i), "")
		if err != nil {
			t.Fatal(err)
		}
		if walked := c.objects.walked.Load() - before; walked > 2 {
			t.Errorf("merge %d walked %d commits, want at most 2 (the agent's own)", i, walked)
		}
		tips = append(tips, tip)
	}
	// The same question from a Client without that knowledge: the walk
	// goes through the job's history (this is what the stop set saves).
	fresh, err := New(dir, Options{Env: isolatedEnv()})
	if err != nil {
		t.Fatal(err)
	}
	git(t, scratch, "checkout", "-q", "-B", "late", tips[len(tips)-2])
	commitFiles(t, scratch, "late", map[string]string{"late.txt": "x"})
	if _, err := fresh.MergeTree(bg(), "results", "late", ""); err != nil {
		t.Fatal(err)
	}
	if walked := fresh.objects.walked.Load(); walked < merges {
		t.Errorf("a fresh Client walked only %d commits; the test no longer shows the saving", walked)
	}
	// Every item is on the results branch.
	files, err := c.ListFiles(bg(), "results", "out")
	if err != nil || len(files) != merges {
		t.Errorf("results has %d files under out/, want %d (%v)", len(files), merges, err)
	}
}

// TestMergeTreeConcurrent: merges of many branches from many goroutines all
// land (only the ref update is serialised, losers redo their merge).
func TestMergeTreeConcurrent(t *testing.T) {
	t.Parallel()
	dir, c := newRepo(t, nil, true)
	git(t, dir, "branch", "results")
	scratch := filepath.Join(t.TempDir(), "scratch")
	git(t, dir, "worktree", "add", "-q", "--detach", scratch, "results")
	const n = 12
	for i := range n {
		git(t, scratch, "checkout", "-q", "-B", fmt.Sprintf("c-%d", i), "results")
		commitFiles(t, scratch, fmt.Sprintf("c %d", i), map[string]string{fmt.Sprintf("out/%d.txt", i): "x"})
	}
	errs := make(chan error, n)
	for i := range n {
		go func() {
			_, err := c.MergeTree(bg(), "results", fmt.Sprintf("c-%d", i), "")
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if files, err := c.ListFiles(bg(), "results", "out"); err != nil || len(files) != n {
		t.Errorf("results has %d files, want %d (%v)", len(files), n, err)
	}
	if merges := git(t, dir, "rev-list", "--count", "--merges", "results"); merges != fmt.Sprint(n) {
		t.Errorf("%s merge commits, want %d", merges, n)
	}
}

// TestMergeDoesNotCopyTheKnownSet: the set of commits known to be merged
// grows by two or three ids per merged item and is never pruned; a merge
// that copied it (it did, under the merge lock) cost O(items merged so far),
// quadratic over a job. With 100,000 known ids a merge's bookkeeping must
// allocate far less than one copy of the set (about 5 MB).
func TestMergeDoesNotCopyTheKnownSet(t *testing.T) {
	dir, c := newRepo(t, nil, true)
	git(t, dir, "branch", "results")
	scratch := filepath.Join(t.TempDir(), "scratch")
	git(t, dir, "worktree", "add", "-q", "--detach", scratch, "results")
	tip := git(t, dir, "rev-parse", "results")
	m := c.mergedFor("refs/heads/results")
	c.observe(m, tip)
	c.mergeMu.Lock()
	for i := range 100000 {
		m.known[fmt.Sprintf("%040x", i)] = true
	}
	c.mergeMu.Unlock()
	git(t, scratch, "checkout", "-q", "-B", "agent", tip)
	commitFiles(t, scratch, "item", map[string]string{"out/x.txt": "x"})
	theirs := git(t, scratch, "rev-parse", "HEAD")
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	w := c.unmerged(m, tip, theirs)
	_, _ = c.descendantTree(m, tip, theirs)
	runtime.ReadMemStats(&after)
	if !w.complete || len(w.frontier) != 1 || w.frontier[0] != tip {
		t.Fatalf("walk %+v, want complete with frontier [%s]", w, tip)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 1<<20 {
		t.Fatalf("a merge's walks allocated %d bytes with 100,000 known commits: the known set is being copied", grew)
	}
}
