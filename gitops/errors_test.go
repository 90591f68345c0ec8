package gitops

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

func TestGitErrorFormat(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		err  *GitError
		want string
	}{
		{
			name: "exit_with_stderr",
			err:  &GitError{Args: []string{"merge", "--no-ff", "x"}, Dir: "/r", ExitCode: 1, Stderr: "fatal: bad\n"},
			want: "git merge --no-ff x (in /r): exit 1: fatal: bad",
		},
		{
			name: "quotes_args_with_spaces",
			err:  &GitError{Args: []string{"commit", "-m", "Merge agent 1", ""}, Dir: "/r", ExitCode: 128},
			want: `git commit -m "Merge agent 1" "" (in /r): exit 128`,
		},
		{
			name: "first_three_lines_only",
			err:  &GitError{Args: []string{"x"}, Dir: "/d", ExitCode: 2, Stderr: "a\n\n b \nc\nd\ne"},
			want: "git x (in /d): exit 2: a | b | c | …",
		},
		{
			name: "not_started",
			err:  &GitError{Args: []string{"status"}, Dir: "/d", ExitCode: -1, Err: errors.New("exec: not found")},
			want: "git status (in /d): exec: not found",
		},
		{
			name: "no_dir",
			err:  &GitError{Args: []string{"version"}, ExitCode: 3},
			want: "git version: exit 3",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := tt.err.Error(); got != tt.want {
				t.Errorf("Error() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestGitErrorUnwrap(t *testing.T) {
	t.Parallel()
	err := fmt.Errorf("wrapped: %w", &GitError{Args: []string{"x"}, ExitCode: -1, Err: context.Canceled})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("errors.Is(%v, context.Canceled) = false", err)
	}
	var ge *GitError
	if !errors.As(err, &ge) || ge.Args[0] != "x" {
		t.Errorf("errors.As did not find the GitError in %v", err)
	}
}

func TestMergeConflictError(t *testing.T) {
	t.Parallel()
	var err error = fmt.Errorf("item 3: %w", &MergeConflictError{Branch: "agent-3", Files: []string{"a.go", "b.go"}})
	if !errors.Is(err, ErrMergeConflict) {
		t.Errorf("errors.Is(err, ErrMergeConflict) = false for %v", err)
	}
	if errors.Is(&GitError{}, ErrMergeConflict) {
		t.Error("a GitError must not match ErrMergeConflict")
	}
	if got, want := err.Error(), "item 3: merge conflict merging agent-3 in a.go, b.go"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}
