package gitops

import (
	"errors"
	"fmt"
	"strings"
)

// ErrNotRepo reports that a directory is not inside a git repository. [New]
// returns it wrapped, with the directory in the message.
var ErrNotRepo = errors.New("not a git repository")

// ErrMergeConflict reports that a merge stopped on conflicts. Merge methods
// return it as a *[MergeConflictError]; test with errors.Is.
var ErrMergeConflict = errors.New("merge conflict")

// ErrRefChanged reports that a compare-and-swap ref update failed because the
// ref no longer pointed at the expected commit (someone else moved it).
var ErrRefChanged = errors.New("ref changed concurrently")

// maxStderrLines bounds how many lines of git's stderr [GitError.Error]
// quotes; the full text stays in the Stderr field.
const maxStderrLines = 3

// GitError is a git process that failed: it exited non-zero, could not be
// started, or was stopped by its context.
type GitError struct {
	// Args are the arguments after "git" (without the -C option).
	Args []string
	// Dir is the directory git ran in (the -C argument).
	Dir string
	// ExitCode is git's exit status, or -1 if it did not exit normally
	// (not started, killed by a signal or by its context).
	ExitCode int
	// Stderr is everything git wrote to stderr, trimmed.
	Stderr string
	// Err is the underlying cause when git did not exit normally (for example
	// context.Canceled or exec.ErrNotFound); nil for a plain non-zero exit.
	Err error
}

// Error formats as "git <args> (in <dir>): exit N: <first lines of stderr>".
// Arguments containing spaces or quotes are quoted; at most three stderr lines
// are shown, joined with " | ".
func (e *GitError) Error() string {
	var b strings.Builder
	b.WriteString("git")
	for _, a := range e.Args {
		b.WriteByte(' ')
		b.WriteString(quoteArg(a))
	}
	if e.Dir != "" {
		fmt.Fprintf(&b, " (in %s)", e.Dir)
	}
	if e.ExitCode >= 0 {
		fmt.Fprintf(&b, ": exit %d", e.ExitCode)
	}
	if e.Err != nil && e.ExitCode < 0 {
		fmt.Fprintf(&b, ": %v", e.Err)
	}
	if s := firstLines(e.Stderr, maxStderrLines); s != "" {
		b.WriteString(": ")
		b.WriteString(s)
	}
	return b.String()
}

// Unwrap returns the underlying cause (nil for a plain non-zero exit).
func (e *GitError) Unwrap() error { return e.Err }

func quoteArg(a string) string {
	if a == "" || strings.ContainsAny(a, " \t\n\"'\\") {
		return fmt.Sprintf("%q", a)
	}
	return a
}

// firstLines returns up to n non-empty lines of s joined with " | ", with
// "…" appended when lines were left out.
func firstLines(s string, n int) string {
	var out []string
	more := false
	for _, l := range strings.Split(s, "\n") {
		l = strings.TrimSpace(l)
		if l == "" {
			continue
		}
		if len(out) == n {
			more = true
			break
		}
		out = append(out, l)
	}
	r := strings.Join(out, " | ")
	if more {
		r += " | …"
	}
	return r
}

// MergeConflictError is a merge that stopped on conflicts. When a merge method
// returns it, nothing was changed: no ref moved and, in worktree mode, the
// merge was aborted so HEAD, index and files are as before.
type MergeConflictError struct {
	// Branch is the branch that was being merged.
	Branch string
	// Files are the conflicted paths (repository-relative, sorted, unique).
	Files []string
	// Detail is git's CONFLICT lines, one per line.
	Detail string
}

// Error formats as "merge conflict merging <branch>: <files>".
func (e *MergeConflictError) Error() string {
	msg := "merge conflict merging " + e.Branch
	if len(e.Files) > 0 {
		msg += " in " + strings.Join(e.Files, ", ")
	}
	return msg
}

// Is reports whether target is [ErrMergeConflict].
func (e *MergeConflictError) Is(target error) bool { return target == ErrMergeConflict }
