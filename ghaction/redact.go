package ghaction

import (
	"encoding/json"
	"sort"
	"strings"
)

// Redactor replaces registered secrets with "***" in text bound for logs,
// artifacts, comments and summaries. The zero value redacts nothing. It is
// not safe for concurrent Add; build it before sharing it.
type Redactor struct {
	secrets []string
	mask    func(string)
}

// NewRedactor returns a Redactor that also calls mask (e.g. go-githubactions'
// AddMask) for every secret added; mask may be nil.
func NewRedactor(mask func(string)) *Redactor { return &Redactor{mask: mask} }

// Add registers secrets; empty and very short values (< 4 characters, which
// would blank out ordinary text) are ignored. Each is also registered in its
// JSON-escaped form so it is caught inside JSON records.
func (r *Redactor) Add(secrets ...string) {
	for _, s := range secrets {
		if len(strings.TrimSpace(s)) < 4 {
			continue
		}
		if r.mask != nil {
			r.mask(s)
		}
		r.secrets = append(r.secrets, s)
		if b, err := json.Marshal(s); err == nil {
			if esc := string(b[1 : len(b)-1]); esc != s {
				r.secrets = append(r.secrets, esc)
			}
		}
	}
	// Longest first, so a secret containing another is replaced whole.
	sort.SliceStable(r.secrets, func(i, j int) bool { return len(r.secrets[i]) > len(r.secrets[j]) })
}

// String returns s with every secret replaced by "***".
func (r *Redactor) String(s string) string {
	if r == nil {
		return s
	}
	for _, sec := range r.secrets {
		s = strings.ReplaceAll(s, sec, "***")
	}
	return s
}

// Bytes is String for byte slices (used on DLQ files before zipping).
func (r *Redactor) Bytes(b []byte) []byte {
	if r == nil || len(r.secrets) == 0 {
		return b
	}
	return []byte(r.String(string(b)))
}
