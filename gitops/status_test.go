package gitops

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestFormatStatus(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in, want string
	}{
		{"clean", "", ""},
		{"modified_unstaged", " M a.go\x00", "Modified: a.go"},
		{"modified_staged", "M  a.go\x00", "Modified: a.go"},
		{"added", "A  n.go\x00", "Added: n.go"},
		{"added_then_modified", "AM n.go\x00", "Added: n.go"},
		{"deleted", " D d.go\x00", "Deleted: d.go"},
		{"renamed", "R  new.go\x00old.go\x00", "Renamed: old.go -> new.go"},
		{"copied", "C  c2.go\x00c1.go\x00", "Copied: c1.go -> c2.go"},
		{"typechange", " T link\x00", "TypeChanged: link"},
		{"conflict", "UU x.go\x00AA y.go\x00DD z.go\x00", "Conflicted: x.go\nConflicted: y.go\nConflicted: z.go"},
		{"untracked_with_space", "?? my file.txt\x00", "Untracked: my file.txt"},
		{"several", " M a.go\x00R  b2\x00b1\x00?? c\x00", "Modified: a.go\nRenamed: b1 -> b2\nUntracked: c"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := formatStatus(tt.in); got != tt.want {
				t.Errorf("formatStatus(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestStatusSummary(t *testing.T) {
	t.Parallel()
	repo, c := newRepo(t, map[string]string{
		"a.go": "package a\n", "gone.txt": "g\n", ".gitignore": "*.log\n",
		"old.txt": "a long enough file\nto be detected\nas a rename\n",
	}, true)
	if got, err := c.StatusSummary(bg(), repo); err != nil || got != "" {
		t.Fatalf("clean StatusSummary = %q, %v; want \"\"", got, err)
	}
	writeFiles(t, repo, map[string]string{"a.go": "package a // edited\n", "new dir/b.txt": "b", "x.log": "ignored"})
	if err := os.Remove(filepath.Join(repo, "gone.txt")); err != nil {
		t.Fatal(err)
	}
	git(t, repo, "mv", "old.txt", "renamed.txt")
	writeFiles(t, repo, map[string]string{"staged.txt": "s"})
	git(t, repo, "add", "staged.txt")
	got, err := c.StatusSummary(bg(), repo)
	want := "Modified: a.go\nDeleted: gone.txt\nRenamed: old.txt -> renamed.txt\nAdded: staged.txt\nUntracked: new dir/b.txt"
	if err != nil || got != want {
		t.Errorf("StatusSummary =\n%s\nwant\n%s\n(err %v)", got, want, err)
	}
}

func TestCommitsSince(t *testing.T) {
	t.Parallel()
	repo, c := newRepo(t, nil, true)
	base := git(t, repo, "rev-parse", "HEAD")
	if got, err := c.CommitsSince(bg(), repo, base); err != nil || got != nil {
		t.Errorf("CommitsSince(HEAD) = %q, %v; want none", got, err)
	}
	c1 := commitFiles(t, repo, "one", map[string]string{"1": "1"})
	c2 := commitFiles(t, repo, "two", map[string]string{"2": "2"})
	got, err := c.CommitsSince(bg(), repo, base)
	if err != nil || !slices.Equal(got, []string{c2, c1}) {
		t.Errorf("CommitsSince = %q, %v; want [%s %s]", got, err, c2, c1)
	}
	if _, err := c.CommitsSince(bg(), repo, "no-such-base"); err == nil {
		t.Error("CommitsSince(bad base) returned no error")
	}
}
