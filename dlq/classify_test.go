package dlq

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"testing"
)

func TestClassify(t *testing.T) {
	tests := []struct {
		msg  string
		want ErrorType
	}{
		{"Commit required but no commit was created", ErrorType{Kind: CommitValidationFailed}},
		{"commit validation failed", ErrorType{Kind: CommitValidationFailed}},
		{"COMMIT REQUIRED for step 2", ErrorType{Kind: CommitValidationFailed}},
		{"Operation timed out after 30s", ErrorType{Kind: Timeout}},
		{"step timeout exceeded (exit code 124)", ErrorType{Kind: Timeout}},
		{"context deadline exceeded", ErrorType{Kind: Timeout}},
		{"CONFLICT (content): Merge conflict in src/lib.rs", ErrorType{Kind: MergeConflict}},
		{"Automatic merge failed; fix conflicts and then commit the result.", ErrorType{Kind: MergeConflict}},
		{"git worktree add failed with exit code 128", ErrorType{Kind: WorktreeError}},
		{"fatal: Out of memory, malloc failed", ErrorType{Kind: ResourceExhausted}},
		{"write /tmp/x: no space left on device", ErrorType{Kind: ResourceExhausted}},
		{"cargo test failed with exit code 101", CommandFailedWith(101)},
		{"process exited with code 2", CommandFailedWith(2)},
		{"exit status 1", CommandFailedWith(1)},
		{"Exit code: 3", CommandFailedWith(3)},
		{"command exited with code 1: invalid argument", CommandFailedWith(1)},
		{"item validation failed: missing field path", ErrorType{Kind: ValidationFailed}},
		{"invalid item: priority must be a number", ErrorType{Kind: ValidationFailed}},
		{"HTTP status code 404", ErrorType{Kind: Unknown}},
		{"failed to merge settings", ErrorType{Kind: Unknown}},
		{"resource not found", ErrorType{Kind: Unknown}},
		{"something broke", ErrorType{Kind: Unknown}},
		{"", ErrorType{Kind: Unknown}},
	}
	for _, tt := range tests {
		t.Run(tt.msg, func(t *testing.T) {
			if got := Classify(tt.msg); got != tt.want {
				t.Errorf("Classify(%q) = %+v, want %+v", tt.msg, got, tt.want)
			}
		})
	}
}

func TestSignature(t *testing.T) {
	timeout := ErrorType{Kind: Timeout}
	failed := CommandFailedWith(1)
	tests := []struct {
		name string
		t    ErrorType
		msg  string
		want string
	}{
		{"seed_example", timeout, "Connection failed at /path/to/file:123 with error code 42", "Timeout::Connection failed at with error code"},
		{"seed_timeout_units", timeout, "Command exceeded 300 second timeout", "Timeout::Command exceeded timeout"},
		{"exit_code", CommandFailedWith(101), "cargo test failed with exit code 101", "CommandFailed::cargo test failed with exit code"},
		{"whitespace_folded", failed, "  build\n\tfailed   badly ", "CommandFailed::build failed badly"},
		{"timestamps", failed, "at 2025-01-11T10:30:00Z and 2025-01-11 10:30:00.123+02:00 job died", "CommandFailed::at and job died"},
		{"clock_time", failed, "died at 10:30:05 today", "CommandFailed::died at today"},
		{"hex_ids", failed, "object a1b2c3d4e5 missing in 0x7ffe", "CommandFailed::object missing in"},
		{"uuid", failed, "session 123e4567-e89b-12d3-a456-426614174000 lost", "CommandFailed::session lost"},
		{"numbered_ids", failed, "item-123 failed on agent_7 at main.go:42 pid=99 v1.2.3", "CommandFailed::failed on at"},
		{"quoted_ids", failed, "cannot find 'item-abc' or \"x.y\" or 'main'", "CommandFailed::cannot find or or 'main'"},
		{"windows_and_urls", failed, `open C:\tmp\x failed fetching https://example.com/a`, "CommandFailed::open failed fetching"},
		{"percent_and_units", failed, "disk 95% full after 30s with 10MB left", "CommandFailed::disk full after with left"},
		{"ten_words", failed, "one two three four five six seven eight nine ten eleven twelve", "CommandFailed::one two three four five six seven eight nine ten"},
		{"ten_words_after_dropping", failed, "a 1 b 2 c 3 d 4 e 5 f 6 g 7 x 8 i 9 j 10 k", "CommandFailed::a b c d e f g x i j"},
		{"empty", ErrorType{Kind: Unknown}, "", "Unknown::"},
		{"file_names", failed, "gofmt would reformat string_slice.go and index.d.ts; os.Exit kept", "CommandFailed::gofmt would reformat and os.Exit kept"},
		{"words_kept_verbatim", failed, "Error: bad thing, really.", "CommandFailed::Error: bad thing, really."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Signature(tt.t, tt.msg); got != tt.want {
				t.Errorf("Signature(%v, %q) = %q, want %q", tt.t, tt.msg, got, tt.want)
			}
		})
	}
}

// Messages that differ only in volatile parts must group together.
func TestSignatureGroupsSimilarMessages(t *testing.T) {
	groups := [][]string{
		{"Connection failed at /path/to/file:123 with error code 42", "Connection failed at /other/file.go:7 with error code 13"},
		{"item-17 timed out after 30s at 2025-01-11T10:30:00Z", "item-981 timed out after 45s at 2026-02-01T00:00:01Z"},
		{"commit deadbeef12 not found in 'refs/heads/x1'", "commit 0a1b2c3d4e not found in 'refs/heads/y22'"},
		// One cause on many files is one group (issue 27: go vet on each file).
		{"gofmt: uint.go is not formatted", "gofmt: bool_slice.go is not formatted", "gofmt: flag.go is not formatted"},
	}
	for _, g := range groups {
		want := Signature(ErrorType{Kind: Unknown}, g[0])
		for _, m := range g[1:] {
			if got := Signature(ErrorType{Kind: Unknown}, m); got != want {
				t.Errorf("Signature(%q) = %q, want %q (same as %q)", m, got, want, g[0])
			}
		}
	}
}

func TestEligibilityAndManualReview(t *testing.T) {
	tests := []struct {
		name     string
		t        ErrorType
		msg      string
		eligible bool
		manual   bool
	}{
		{"timeout", ErrorType{Kind: Timeout}, "Command exceeded 300 second timeout", true, false},
		{"seed_command_failed", CommandFailedWith(101), "cargo test failed with exit code 101", true, false},
		{"merge_conflict", ErrorType{Kind: MergeConflict}, "conflict in README.md", true, false},
		{"worktree", ErrorType{Kind: WorktreeError}, "git worktree add failed", true, false},
		{"resource", ErrorType{Kind: ResourceExhausted}, "out of memory", true, false},
		{"unknown", ErrorType{Kind: Unknown}, "something broke", true, false},
		{"git_fatal_is_not_manual", CommandFailedWith(128), "fatal: unable to access 'https://x/': Could not resolve host", true, false},
		{"commit_validation", ErrorType{Kind: CommitValidationFailed}, "Commit required but no commit was created", false, true},
		{"validation", ErrorType{Kind: ValidationFailed}, "item validation failed", false, true},
		{"permission", CommandFailedWith(1), "open /etc/x: Permission denied", false, true},
		{"access_denied", ErrorType{Kind: Unknown}, "Access denied for user", false, true},
		{"critical", ErrorType{Kind: Timeout}, "critical: database timed out", false, true},
		{"corrupted", ErrorType{Kind: Unknown}, "index file corrupted", false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ReprocessEligible(tt.t, tt.msg); got != tt.eligible {
				t.Errorf("ReprocessEligible = %v, want %v", got, tt.eligible)
			}
			if got := ManualReviewRequired(tt.t, tt.msg); got != tt.manual {
				t.Errorf("ManualReviewRequired = %v, want %v", got, tt.manual)
			}
		})
	}
}

func TestClassifyErrorDiskFull(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want ErrorKind
	}{
		{"ENOSPC errno", &os.PathError{Op: "write", Path: "/state/x", Err: syscall.ENOSPC}, ResourceExhausted},
		{"EDQUOT errno", fmt.Errorf("write checkpoint: %w", &os.PathError{Op: "write", Path: "/x", Err: syscall.EDQUOT}), ResourceExhausted},
		{"ENOSPC text from git beats worktree", errors.New("add worktree /w: exit status 128: fatal: could not write index: No space left on device"), ResourceExhausted},
		{"EMFILE", &os.PathError{Op: "open", Path: "/x", Err: syscall.EMFILE}, ResourceExhausted},
		{"other errno", &os.PathError{Op: "open", Path: "/x", Err: syscall.EACCES}, Unknown},
		{"worktree text", errors.New("git worktree add failed"), WorktreeError},
		{"nil", nil, Unknown},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ClassifyError(tt.err); got.Kind != tt.want {
				t.Errorf("ClassifyError(%v) = %v, want %s", tt.err, got, tt.want)
			}
		})
	}
	if IsDiskFull(&os.PathError{Op: "write", Path: "/x", Err: syscall.EIO}) {
		t.Error("EIO is not disk full")
	}
}
