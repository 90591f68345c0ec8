package gitops

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

func TestDeleteBranches(t *testing.T) {
	t.Parallel()
	repo, c := newRepo(t, nil, true)
	var names []string
	for i := range 30 {
		names = append(names, fmt.Sprintf("prodigy/agent-%d", i))
		git(t, repo, "branch", names[i])
	}
	git(t, repo, "pack-refs", "--all") // half packed, half loose
	for i := 30; i < 40; i++ {
		names = append(names, fmt.Sprintf("prodigy/agent-%d", i))
		git(t, repo, "branch", names[i])
	}
	git(t, repo, "branch", "keep-me")
	if err := c.DeleteBranches(bg(), append(names, "never-existed")); err != nil {
		t.Fatal(err)
	}
	if got := git(t, repo, "for-each-ref", "--format=%(refname:short)", "refs/heads/"); got != "keep-me\nmain" {
		t.Errorf("branches left = %q, want keep-me and main", got)
	}
	for _, n := range names[:3] {
		if ok, _ := c.BranchExists(bg(), n); ok {
			t.Errorf("BranchExists(%s) after delete = true", n)
		}
	}
	if err := c.DeleteBranch(bg(), "never-existed"); err != nil {
		t.Errorf("DeleteBranch(missing) = %v, want nil", err)
	}
	if err := c.DeleteBranches(bg(), nil); err != nil {
		t.Errorf("DeleteBranches(nil) = %v", err)
	}
}

func TestDeleteBranchesRefusals(t *testing.T) {
	t.Parallel()
	repo, c := newRepo(t, nil, true)
	wt := filepath.Join(t.TempDir(), "wt")
	if err := c.WorktreeAdd(bg(), wt, "in-use", "HEAD"); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name    string
		names   []string
		want    string
		deleted bool // whether the valid, free branch is deleted anyway
	}{
		{"invalid_name", []string{"a", "bad name"}, "invalid branch name", false},
		{"newline", []string{"a", "x\ndelete refs/heads/main"}, "invalid branch name", false},
		{"checked_out_linked", []string{"a", "in-use"}, "kept in-use", true},
		{"checked_out_main", []string{"main", "a"}, "kept main", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			git(t, repo, "branch", "-f", "a")
			err := c.DeleteBranches(bg(), tt.names)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("DeleteBranches(%q) = %v, want %q", tt.names, err, tt.want)
			}
			if got := errors.Is(err, ErrBranchCheckedOut); got != tt.deleted {
				t.Errorf("errors.Is(ErrBranchCheckedOut) = %v", got)
			}
			if ok, _ := c.BranchExists(bg(), "a"); ok == tt.deleted {
				t.Errorf("branch a exists = %v, want %v", ok, !tt.deleted)
			}
			for _, b := range []string{"main", "in-use"} {
				if ok, _ := c.BranchExists(bg(), b); !ok {
					t.Fatalf("checked-out branch %s was deleted", b)
				}
			}
		})
	}
	if err := c.DeleteBranch(bg(), "in-use"); !errors.Is(err, ErrBranchCheckedOut) {
		t.Errorf("DeleteBranch(checked out) = %v, want ErrBranchCheckedOut", err)
	}
}
