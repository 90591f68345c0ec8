package gitops

import (
	"errors"
	"path/filepath"
	"testing"
)

func TestResolveRef(t *testing.T) {
	t.Parallel()
	dir, c := newRepo(t, nil, true)
	first := git(t, dir, "rev-parse", "HEAD")
	second := commitFiles(t, dir, "second", map[string]string{"b.txt": "b"})
	git(t, dir, "branch", "feature/x", first)
	git(t, dir, "branch", "packed-one", first)
	git(t, dir, "tag", "-a", "-m", "annotated", "v1", first)
	git(t, dir, "tag", "light", second)
	git(t, dir, "pack-refs", "--all")                // feature/x, packed-one, tags → packed-refs
	git(t, dir, "branch", "-f", "feature/x", second) // loose now shadows packed
	git(t, dir, "symbolic-ref", "refs/heads/alias", "refs/heads/main")
	git(t, dir, "branch", "amb", first)
	git(t, dir, "tag", "amb", second) // tag wins over branch in git's order

	tests := []struct {
		ref, want string
	}{
		{"main", second},
		{"refs/heads/main", second},
		{"feature/x", second},
		{"refs/heads/feature/x", second},
		{"packed-one", first},
		{"refs/heads/packed-one", first},
		{"alias", second},
		{"v1", first},
		{"refs/tags/v1", first},
		{"light", second},
		{"amb", second},
		{"HEAD", second},
		{"HEAD~1", first},
		{first, first},
	}
	for _, tt := range tests {
		t.Run(tt.ref, func(t *testing.T) {
			got, err := c.ResolveRef(bg(), tt.ref)
			if err != nil || got != tt.want {
				t.Errorf("ResolveRef(%q) = %q, %v; want %q", tt.ref, got, err, tt.want)
			}
		})
	}
	for _, missing := range []string{"nope", "refs/heads/nope", "feature/nope", "bad..name"} {
		if _, err := c.ResolveRef(bg(), missing); !errors.Is(err, ErrRefNotFound) {
			t.Errorf("ResolveRef(%q) error = %v, want ErrRefNotFound", missing, err)
		}
	}
}

func TestBranchExists(t *testing.T) {
	t.Parallel()
	dir, c := newRepo(t, nil, true)
	git(t, dir, "branch", "packed/b")
	git(t, dir, "pack-refs", "--all")
	git(t, dir, "branch", "loose")
	for _, tt := range []struct {
		name string
		want bool
	}{
		{"main", true}, {"packed/b", true}, {"loose", true}, {"refs/heads/loose", true},
		{"packed", false}, {"nope", false}, {"loose/sub", false},
	} {
		got, err := c.BranchExists(bg(), tt.name)
		if err != nil || got != tt.want {
			t.Errorf("BranchExists(%q) = %v, %v; want %v", tt.name, got, err, tt.want)
		}
	}
	if _, err := c.BranchExists(bg(), "bad name"); err == nil {
		t.Error("BranchExists(invalid) returned no error")
	}
}

func TestHeadAndCurrentBranch(t *testing.T) {
	t.Parallel()
	dir, c := newRepo(t, map[string]string{"sub/f.txt": "f"}, true)
	head := git(t, dir, "rev-parse", "HEAD")
	wt := filepath.Join(t.TempDir(), "wt")
	if err := c.WorktreeAdd(bg(), wt, "prodigy/job-1", head); err != nil {
		t.Fatal(err)
	}
	wtHead := commitFiles(t, wt, "in worktree", map[string]string{"w.txt": "w"})
	detached := filepath.Join(t.TempDir(), "det")
	git(t, dir, "worktree", "add", "-q", "--detach", detached, head)

	for _, tt := range []struct {
		name, dir, head, branch string
	}{
		{"main", dir, head, "main"},
		{"linked", wt, wtHead, "prodigy/job-1"},
		{"detached", detached, head, ""},
		{"subdir_fallback_to_git", filepath.Join(dir, "sub"), head, "main"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := c.Head(bg(), tt.dir)
			if err != nil || got != tt.head {
				t.Errorf("Head = %q, %v; want %q", got, err, tt.head)
			}
			br, err := c.CurrentBranch(bg(), tt.dir)
			if err != nil || br != tt.branch {
				t.Errorf("CurrentBranch = %q, %v; want %q", br, err, tt.branch)
			}
		})
	}
	// After pack-refs the worktree's branch is only in packed-refs.
	git(t, dir, "pack-refs", "--all")
	if got, err := c.Head(bg(), wt); err != nil || got != wtHead {
		t.Errorf("Head(linked, packed) = %q, %v; want %q", got, err, wtHead)
	}
}

func TestTreeOf(t *testing.T) {
	t.Parallel()
	dir, c := newRepo(t, nil, true)
	got, err := c.TreeOf(bg(), "main")
	if want := git(t, dir, "rev-parse", "main^{tree}"); err != nil || got != want {
		t.Errorf("TreeOf(main) = %q, %v; want %q", got, err, want)
	}
	if _, err := c.TreeOf(bg(), "nope"); err == nil {
		t.Error("TreeOf(nope) returned no error")
	}
}

func TestCommitTreeInProcess(t *testing.T) {
	t.Parallel()
	dir, c := newRepo(t, nil, true)
	head := git(t, dir, "rev-parse", "HEAD")
	want := git(t, dir, "rev-parse", "HEAD^{tree}")
	if got, ok := c.objects.tree(head); !ok || got != want {
		t.Errorf("tree(loose commit) = %q, %v; want %q", got, ok, want)
	}
	if _, ok := c.objects.tree(want); ok {
		t.Error("tree(tree object) = ok, want not a commit")
	}
	git(t, dir, "gc", "-q")
	if got, ok := c.objects.tree(head); !ok || got != want {
		t.Errorf("tree(packed commit) = %q, %v; want %q", got, ok, want)
	}
}
