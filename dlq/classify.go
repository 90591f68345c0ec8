package dlq

import (
	"errors"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"unicode"
)

// Classification phrases, matched case-insensitively as substrings, in the
// order Classify tries them (docs/dlq.md has the table).
var (
	commitPhrases     = []string{"commit required", "commit validation", "no commit was created", "no commits were created"}
	timeoutPhrases    = []string{"timed out", "timeout", "deadline exceeded"}
	mergePhrases      = []string{"merge conflict", "conflict (", "automatic merge failed", "conflicts in", "merge failed"}
	worktreePhrases   = []string{"worktree"}
	resourcePhrases   = []string{"out of memory", "cannot allocate memory", "no space left on device", "disk quota exceeded", "too many open files", "resource exhausted", "resources exhausted", "resource limit"}
	validationPhrases = []string{"validation failed", "validation error", "failed validation", "invalid"}

	exitCodeRe = regexp.MustCompile(`(?i)(?:exit(?:ed)?(?: with)? (?:code|status)|exit code)[:=]?\s*(-?\d+)`)
)

func containsAny(lower string, phrases []string) bool {
	for _, p := range phrases {
		if strings.Contains(lower, p) {
			return true
		}
	}
	return false
}

// Classify derives an ErrorType from an error message when the runner did
// not know the type. Case-insensitive, first match wins:
// commit required/validation → CommitValidationFailed; timed out/timeout/
// deadline exceeded → Timeout; merge conflict phrases → MergeConflict;
// "worktree" → WorktreeError; resource exhaustion phrases →
// ResourceExhausted; "exit code N", "exited with code N", "exit status N" →
// CommandFailed{N}; validation failed/invalid → ValidationFailed; else
// Unknown. Unlike Prodigy, a bare "merge", "resource" or an HTTP "status
// code" does not classify, and an explicit exit code beats the vague word
// "invalid".
func Classify(msg string) ErrorType {
	lower := strings.ToLower(msg)
	switch {
	case containsAny(lower, commitPhrases):
		return ErrorType{Kind: CommitValidationFailed}
	case containsAny(lower, timeoutPhrases):
		return ErrorType{Kind: Timeout}
	case containsAny(lower, mergePhrases):
		return ErrorType{Kind: MergeConflict}
	case containsAny(lower, worktreePhrases):
		return ErrorType{Kind: WorktreeError}
	case containsAny(lower, resourcePhrases):
		return ErrorType{Kind: ResourceExhausted}
	}
	if m := exitCodeRe.FindStringSubmatch(msg); m != nil {
		if code, err := strconv.Atoi(m[1]); err == nil {
			return CommandFailedWith(code)
		}
	}
	if containsAny(lower, validationPhrases) {
		return ErrorType{Kind: ValidationFailed}
	}
	return ErrorType{Kind: Unknown}
}

// manualReviewPhrases mark failures a human must look at before a redrive.
// "fatal" is deliberately absent: git prefixes transient network errors
// with "fatal:".
var manualReviewPhrases = []string{"permission denied", "access denied", "not permitted", "unauthorized",
	"authentication failed", "critical", "corrupt"}

// ManualReviewRequired reports whether a failure needs a human before it is
// redriven: the type is CommitValidationFailed or ValidationFailed (the
// agent or the item itself is wrong, a retry repeats it), or the message
// mentions permission denied, access denied, not permitted, unauthorized,
// authentication failed, critical or corrupt (case-insensitive).
func ManualReviewRequired(t ErrorType, msg string) bool {
	if t.Kind == CommitValidationFailed || t.Kind == ValidationFailed {
		return true
	}
	return containsAny(strings.ToLower(msg), manualReviewPhrases)
}

// ReprocessEligible reports whether `dlq retry` picks the record without
// --force: every failure is eligible unless ManualReviewRequired. Timeouts,
// merge conflicts, worktree and resource errors are transient; a failed
// command (CommandFailed, Unknown) is retried after the user fixes its cause.
func ReprocessEligible(t ErrorType, msg string) bool {
	return !ManualReviewRequired(t, msg)
}

// maxSignatureWords bounds the normalised message of a signature.
const maxSignatureWords = 10

var (
	timestampRe = regexp.MustCompile(`\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?\b`)
	numberRe    = regexp.MustCompile(`^[-+]?(?:\d+(?:[.,]\d+)*)(?:[a-zA-Zµ%]{1,3})?$`)
	hexRe       = regexp.MustCompile(`^(?:0[xX][0-9a-fA-F]+|[0-9a-fA-F]*\d[0-9a-fA-F]*[a-fA-F][0-9a-fA-F]*|[0-9a-fA-F]*[a-fA-F][0-9a-fA-F]*\d[0-9a-fA-F]*)$`)
	uuidRe      = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)
	timeRe      = regexp.MustCompile(`^\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?$`)
	numberedRe  = regexp.MustCompile(`[-_:#=.@]\d`)
	// fileNameRe matches a bare file name: a stem, a dot and a short
	// lower-case extension (uint.go, string_slice.go, package.json,
	// index.d.ts), so that one cause failing on many files is one group.
	fileNameRe = regexp.MustCompile(`^[\w+-]+(?:\.[\w+-]+)*\.[a-z][a-z0-9]{0,4}$`)
)

// unitWords are dropped when they follow a dropped number ("300 second").
var unitWords = map[string]bool{"ms": true, "s": true, "sec": true, "secs": true, "second": true, "seconds": true,
	"min": true, "mins": true, "minute": true, "minutes": true, "h": true, "hour": true, "hours": true,
	"millisecond": true, "milliseconds": true, "byte": true, "bytes": true, "kb": true, "mb": true, "gb": true,
	"kib": true, "mib": true, "gib": true, "times": true, "attempts": true, "attempt": true}

// Signature returns "<ErrorType>::<normalised message>" so that failures
// differing only in numbers, paths, hex ids, timestamps or quoted ids share
// a signature. Normalisation: timestamps are cut out, the message is split
// on whitespace (which folds it), and a word is dropped when, stripped of
// surrounding punctuation, it is empty, contains '/' or '\' (paths, URLs),
// is a bare file name (uint.go, package.json: a dot and a lower-case
// extension of at most 5 characters), is a number with an optional short unit (42, 3.5, 30s, 10MB, 95%), a
// clock time, a hex id (0x1f, a1b2c3d, …) or UUID, contains a number
// attached by - _ : # = . @ (item-123, main.go:42, pid=7, v1.2), or is a
// quoted token containing a digit, '-', '_', '.' or ':'. A unit word right
// after a dropped number goes with it ("300 second timeout" → "timeout").
// The first 10 remaining words are kept, joined by single spaces.
//
// Example: Timeout + "Connection failed at /path/to/file:123 with error
// code 42" → "Timeout::Connection failed at with error code".
func Signature(t ErrorType, msg string) string {
	msg = timestampRe.ReplaceAllString(msg, " ")
	words := make([]string, 0, maxSignatureWords)
	prevDropped := false
	for _, w := range strings.Fields(msg) {
		if len(words) == maxSignatureWords {
			break
		}
		core := strings.TrimFunc(w, isEdgePunct)
		if prevDropped && unitWords[strings.ToLower(core)] {
			continue
		}
		if dropWord(w, core) {
			prevDropped = true
			continue
		}
		prevDropped = false
		words = append(words, w)
	}
	return t.String() + "::" + strings.Join(words, " ")
}

// isEdgePunct reports the characters trimmed from both ends of a word before
// it is judged; path separators, '#' and '%' stay because they carry meaning.
func isEdgePunct(r rune) bool {
	switch r {
	case '/', '\\', '#', '%':
		return false
	}
	return unicode.IsPunct(r) || unicode.IsSymbol(r)
}

func dropWord(raw, core string) bool {
	if core == "" {
		return true
	}
	if strings.ContainsAny(core, `/\`) {
		return true
	}
	if numberRe.MatchString(core) || timeRe.MatchString(core) || uuidRe.MatchString(core) {
		return true
	}
	if len(core) >= 6 && hexRe.MatchString(core) || strings.HasPrefix(core, "0x") && hexRe.MatchString(core) {
		return true
	}
	if numberedRe.MatchString(core) || fileNameRe.MatchString(core) {
		return true
	}
	if quoted(raw) && strings.ContainsAny(core, "0123456789-_.:") {
		return true
	}
	return false
}

// quoted reports whether raw (a whitespace-free word) starts and ends with a
// matching quote character, ignoring trailing punctuation such as a comma.
func quoted(raw string) bool {
	raw = strings.TrimRight(raw, ",.;:!?)]}")
	raw = strings.TrimLeft(raw, "([{")
	if len(raw) < 2 {
		return false
	}
	first, last := raw[0], raw[len(raw)-1]
	return first == last && (first == '\'' || first == '"' || first == '`')
}

// diskFullPhrases are the messages of ENOSPC and EDQUOT as programs print
// them (strerror).
var diskFullPhrases = []string{"no space left on device", "disk quota exceeded"}

// IsDiskFull reports whether err's chain holds a disk-full errno: ENOSPC
// (no space left on device) or EDQUOT (disk quota exceeded), or its text
// says so (an error relayed from a child process has only text).
func IsDiskFull(err error) bool {
	if err == nil {
		return false
	}
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) || SaysDiskFull(err.Error())
}

// SaysDiskFull reports whether msg contains a disk-full message.
func SaysDiskFull(msg string) bool {
	return containsAny(strings.ToLower(msg), diskFullPhrases)
}

// ClassifyError is Classify for an error value. A full disk (IsDiskFull)
// or another exhausted resource errno in its chain (ENOMEM, EMFILE,
// ENFILE) is ResourceExhausted whatever else the message names (a
// worktree, an exit code): retrying it elsewhere will not help until the
// resource is freed. Otherwise the message is classified.
func ClassifyError(err error) ErrorType {
	if err == nil {
		return ErrorType{Kind: Unknown}
	}
	if IsDiskFull(err) || errors.Is(err, syscall.ENOMEM) || errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) {
		return ErrorType{Kind: ResourceExhausted}
	}
	return Classify(err.Error())
}
