package gitops

import (
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
	git(t, repo, "branch", "a")
	wt := filepath.Join(t.TempDir(), "wt")
	if err := c.WorktreeAdd(bg(), wt, "in-use", "HEAD"); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name  string
		names []string
		want  string
	}{
		{"invalid_name", []string{"a", "bad name"}, "invalid branch name"},
		{"newline", []string{"a\ndelete refs/heads/main"}, "invalid branch name"},
		{"checked_out_linked", []string{"a", "in-use"}, "checked out"},
		{"checked_out_main", []string{"a", "main"}, "checked out"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := c.DeleteBranches(bg(), tt.names)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("DeleteBranches(%q) = %v, want %q", tt.names, err, tt.want)
			}
			if ok, _ := c.BranchExists(bg(), "a"); !ok {
				t.Error("branch a deleted although the call failed")
			}
		})
	}
}
