package redact

import (
	"bytes"
	"encoding/json"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Mask replaces every run of secret bytes.
const Mask = "***"

// Config lists the secrets of a Redactor.
type Config struct {
	// Environ is a process environment (KEY=VALUE entries). The values of
	// secret-looking names (SecretName, at least MinEnvValue bytes) are
	// secrets.
	Environ []string
	// Names are variables declared secret (the workflow's `secrets:` key);
	// their values in Environ are secrets whatever the name looks like
	// (at least MinValue bytes).
	Names []string
	// Values are extra secret values (tokens, the Action's secret-values
	// input); values shorter than MinValue are ignored.
	Values []string
}

// Redactor replaces secrets with Mask. Build it with New; the zero value
// and nil redact token shapes only.
type Redactor struct {
	values []string // the secret values as given (for runner masks)
	pats   []pattern
	// filter maps hash3 of a 3-byte prefix to 1 + an index into buckets
	// (0: no pattern starts with such a prefix).
	filter  []int32
	buckets [][]int32 // indexes into pats
	maxLit  int       // longest literal pattern
	star    bool      // a literal contains '*': redact until stable
}

// pattern is a literal secret or the anchor of a token shape.
type pattern struct {
	lit   []byte
	shape *shape // nil for literals
}

// shape is a well-known token format, found where its anchor occurs.
type shape struct {
	anchors  []string
	boundary bool // the anchor must not follow a letter or digit (sk- in "task-…")
	// match returns the end of the token starting at b[0] (with the
	// anchor), or -1.
	match func(b []byte) int
}

// shapeWindow bounds a token; a longer one is masked to the window's end.
const shapeWindow = 8 << 10

// pemWindow bounds a PEM private-key block.
const pemWindow = 64 << 10

var shapes = []*shape{
	{anchors: []string{"ghp_", "gho_", "ghu_", "ghs_", "ghr_"}, match: run(4, isAlnum, 30)},
	{anchors: []string{"github_pat_"}, match: run(11, isWord, 30)},
	// sk-ant-… (Anthropic) and sk-…/sk-proj-… (OpenAI-style).
	{anchors: []string{"sk-"}, match: run(3, isKeyChar, 20), boundary: true},
	{anchors: []string{"AKIA", "ASIA"}, match: awsKeyID},
	{anchors: []string{"xox"}, match: slackToken, boundary: true},
	{anchors: []string{"eyJ"}, match: jwtToken, boundary: true},
	{anchors: []string{"-----BEGIN"}, match: pemBlock},
}

// run matches the anchor (n bytes) followed by at least least bytes of class.
func run(n int, class func(byte) bool, least int) func([]byte) int {
	return func(b []byte) int {
		e := span0(b, n, class)
		if e-n < least {
			return -1
		}
		return e
	}
}

// span0 returns the end of the run of class bytes starting at b[i].
func span0(b []byte, i int, class func(byte) bool) int {
	for i < len(b) && i < shapeWindow && class(b[i]) {
		i++
	}
	return i
}

// awsKeyID matches AKIA/ASIA and 16 upper-case letters or digits.
func awsKeyID(b []byte) int {
	if len(b) < 20 {
		return -1
	}
	for _, c := range b[4:20] {
		if !('A' <= c && c <= 'Z' || '0' <= c && c <= '9') {
			return -1
		}
	}
	return 20
}

// slackToken matches xox?- and at least 10 token bytes.
func slackToken(b []byte) int {
	if len(b) < 5 || b[3] < 'a' || b[3] > 'z' || b[4] != '-' {
		return -1
	}
	e := span0(b, 5, func(c byte) bool { return isAlnum(c) || c == '-' })
	if e-5 < 10 {
		return -1
	}
	return e
}

// jwtToken matches a JSON Web Token: base64url("{…") "." base64url("{…")
// ["." signature]; a token cut after the payload's start is still masked.
func jwtToken(b []byte) int {
	e := span0(b, 3, isB64URL)
	if e-3 < 8 || !bytes.HasPrefix(b[e:], []byte(".eyJ")) {
		return -1
	}
	e = span0(b, e+4, isB64URL)
	if e < len(b) && b[e] == '.' {
		e = span0(b, e+1, isB64URL)
	}
	return e
}

func isWord(c byte) bool    { return isAlnum(c) || c == '_' }
func isKeyChar(c byte) bool { return isAlnum(c) || c == '_' || c == '-' }
func isB64URL(c byte) bool  { return isAlnum(c) || c == '_' || c == '-' }

var (
	pemBegin = regexp.MustCompile(`^-----BEGIN[A-Z0-9 ]{0,40}PRIVATE KEY[A-Z ]{0,20}-----`)
	pemEnd   = regexp.MustCompile(`^-----END[A-Z0-9 ]{0,40}PRIVATE KEY[A-Z ]{0,20}-----`)
)

// pemBlock matches a PEM private-key block from its BEGIN line through its
// END line, whatever the line breaks (real or JSON-escaped) and body. An
// unterminated block (a log cut short) is masked through its key-like body.
func pemBlock(b []byte) int {
	m := pemBegin.FindIndex(b[:min(len(b), 100)])
	if m == nil {
		return -1
	}
	w := b[:min(len(b), pemWindow)]
	for off := m[1]; ; {
		k := bytes.Index(w[off:], []byte("-----END"))
		if k < 0 {
			break
		}
		if e := pemEnd.FindIndex(w[off+k : min(len(w), off+k+100)]); e != nil {
			return off + k + e[1]
		}
		off += k + len("-----END")
	}
	end := m[1]
	for end < len(w) && (isAlnum(w[end]) || bytes.IndexByte([]byte("+/=: \t\r\n,.-\\"), w[end]) >= 0) {
		end++
	}
	return end
}

// shapesOnly serves nil Redactors.
var shapesOnly = New(Config{})

// New builds a Redactor from c.
func New(c Config) *Redactor {
	vals := append(envValues(c.Environ, c.Names), c.Values...)
	return build(vals)
}

// With returns a Redactor that also redacts values (shorter than MinValue
// are ignored); r is unchanged.
func (r *Redactor) With(values ...string) *Redactor {
	if r == nil {
		r = shapesOnly
	}
	return build(append(slices.Clone(r.values), values...))
}

// Values returns the literal secrets as given (not their escaped forms),
// longest first; for registering masks with a log service.
func (r *Redactor) Values() []string {
	if r == nil {
		return nil
	}
	return slices.Clone(r.values)
}

func build(vals []string) *Redactor {
	r := &Redactor{filter: make([]int32, filterSize)}
	seenVal := map[string]bool{}
	seenLit := map[string]bool{}
	addLit := func(s string) {
		if len(s) < MinValue || seenLit[s] {
			return
		}
		seenLit[s] = true
		r.add(pattern{lit: []byte(s)})
		r.maxLit = max(r.maxLit, len(s))
		r.star = r.star || strings.Contains(s, "*")
	}
	for _, v := range vals {
		if len(v) < MinValue || seenVal[v] {
			continue
		}
		seenVal[v] = true
		r.values = append(r.values, v)
		for _, form := range forms(v) {
			addLit(form)
		}
		// A multi-line secret is also masked line by line, as a log
		// service would (a key printed with other line endings).
		if strings.ContainsAny(v, "\r\n") {
			for _, line := range strings.FieldsFunc(v, func(c rune) bool { return c == '\n' || c == '\r' }) {
				if line = strings.TrimSpace(line); len(line) >= MinEnvValue {
					for _, form := range forms(line) {
						addLit(form)
					}
				}
			}
		}
	}
	slices.SortStableFunc(r.values, func(a, b string) int { return len(b) - len(a) })
	for _, sh := range shapes {
		for _, a := range sh.anchors {
			r.add(pattern{lit: []byte(a), shape: sh})
		}
	}
	return r
}

// forms returns s and its escaped forms: inside a JSON string (with and
// without HTML escaping), inside Go's %q and in a URL query.
func forms(s string) []string {
	out := []string{s}
	add := func(f string) {
		if !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	if b, err := json.Marshal(s); err == nil {
		add(string(b[1 : len(b)-1]))
	}
	add(jsonString(s, false)[1 : len(jsonString(s, false))-1])
	q := strconv.Quote(s)
	add(q[1 : len(q)-1])
	add(url.QueryEscape(s))
	add(strings.ReplaceAll(s, `"`, `""`)) // a CSV field
	return out
}

// filterSize is the number of buckets of the 3-byte prefix filter.
const filterSize = 1 << 16

func key3(b []byte, i int) uint32 { return uint32(b[i]) | uint32(b[i+1])<<8 | uint32(b[i+2])<<16 }

func hash3(k uint32) uint32 { return (k * 2654435761) >> 16 }

func (r *Redactor) add(p pattern) {
	h := hash3(key3(p.lit, 0))
	if r.filter[h] == 0 {
		r.buckets = append(r.buckets, nil)
		r.filter[h] = int32(len(r.buckets))
	}
	bi := r.filter[h] - 1
	r.buckets[bi] = append(r.buckets[bi], int32(len(r.pats)))
	r.pats = append(r.pats, p)
}

// span is a half-open byte range [s, e) of secret text.
type span struct{ s, e int }

// find returns the merged, ordered spans of secrets in b.
func (r *Redactor) find(b []byte) []span {
	var out []span
	push := func(s, e int) {
		if n := len(out); n > 0 && s <= out[n-1].e {
			out[n-1].e = max(out[n-1].e, e)
			return
		}
		out = append(out, span{s, e})
	}
	filter := r.filter
	for i := 0; i+3 <= len(b); i++ {
		bi := filter[hash3(key3(b, i))]
		if bi == 0 {
			continue
		}
		for _, pi := range r.buckets[bi-1] {
			p := &r.pats[pi]
			if !bytes.HasPrefix(b[i:], p.lit) {
				continue
			}
			if p.shape == nil {
				push(i, i+len(p.lit))
				continue
			}
			if p.shape.boundary && i > 0 && isAlnum(b[i-1]) {
				continue
			}
			if end := p.shape.match(b[i:]); end > 0 {
				push(i, i+end)
			}
		}
	}
	return out
}

func isAlnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

// apply replaces spans of b with Mask.
func apply(b []byte, spans []span) []byte {
	out := make([]byte, 0, len(b))
	last := 0
	for _, sp := range spans {
		out = append(out, b[last:sp.s]...)
		out = append(out, Mask...)
		last = sp.e
	}
	return append(out, b[last:]...)
}

// text redacts b; changed is false (and b returned) when it holds no secret.
func (r *Redactor) text(b []byte) (out []byte, changed bool) {
	if r == nil {
		r = shapesOnly
	}
	out = b
	// A literal containing '*' can re-form around a mask; every pass that
	// changes something shortens the text, so this ends.
	for range 16 {
		spans := r.find(out)
		if len(spans) == 0 {
			return out, changed
		}
		out, changed = apply(out, spans), true
		if !r.star {
			break
		}
	}
	return out, changed
}

// Bytes returns b with every secret replaced by Mask; b itself is returned
// when it holds none.
func (r *Redactor) Bytes(b []byte) []byte {
	out, _ := r.text(b)
	return out
}

// String returns s with every secret replaced by Mask.
func (r *Redactor) String(s string) string {
	out, changed := r.text([]byte(s))
	if !changed {
		return s
	}
	return string(out)
}
