package actionapp

import (
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/prodigy-action/prodigy-action/runner"
)

// zipMeta is the DLQ artifact's description of the fan-out it belongs to:
// the sticky comment's key, the PR and the run history. It is data (a
// redrive validates every field and executes nothing from it).
const zipMeta = "meta.json"

// metaFormat is artifactMeta's format version.
const metaFormat = 1

// Bounds of meta.json (a crafted artifact may hold anything).
const (
	maxMetaBytes   = 64 << 10
	maxKeyLen      = 200
	maxHistory     = 20
	maxHistoryRuns = 1 << 53 // run ids are JSON numbers
)

// artifactMeta is meta.json.
type artifactMeta struct {
	Format int `json:"format"`
	// CommentKey keys the sticky comment (CommentMarker); a redrive of this
	// artifact edits the comment with the same key.
	CommentKey string `json:"comment_key"`
	// JobID is the job whose DLQ this is (shown only).
	JobID string `json:"job_id,omitempty"`
	// PRNumber is the pull request the fan-out commented on (0: none).
	PRNumber int `json:"pr_number,omitempty"`
	// History lists the runs of this fan-out, oldest first (at most maxHistory).
	History []historyEntry `json:"history"`
}

// historyEntry is one run (the original or a redrive) of a fan-out.
type historyEntry struct {
	RunID      int64     `json:"run_id"`
	RunAttempt int       `json:"run_attempt"`
	Command    string    `json:"command"` // "run" or "retry"
	Total      int       `json:"total"`
	Successful int       `json:"successful"`
	Failed     int       `json:"failed"`
	At         time.Time `json:"at"`
}

// parseMeta decodes and validates meta.json from an artifact. Fields that
// fail validation are dropped, each with a warning; nothing in it is ever
// executed.
func parseMeta(b []byte) (artifactMeta, []string) {
	var m artifactMeta
	if len(b) > maxMetaBytes {
		return artifactMeta{}, []string{fmt.Sprintf("%s is %d bytes (limit %d); ignored", zipMeta, len(b), maxMetaBytes)}
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return artifactMeta{}, []string{fmt.Sprintf("%s is not valid: %v; ignored", zipMeta, err)}
	}
	if m.Format != metaFormat {
		return artifactMeta{}, []string{fmt.Sprintf("%s has format %d (want %d); ignored", zipMeta, m.Format, metaFormat)}
	}
	var warns []string
	if m.CommentKey != "" {
		if err := validCommentKey(m.CommentKey); err != nil {
			warns = append(warns, fmt.Sprintf("%s: comment_key ignored: %v", zipMeta, err))
			m.CommentKey = ""
		}
	}
	if m.JobID != "" && runner.ValidJobID(m.JobID) != nil {
		warns = append(warns, fmt.Sprintf("%s: job_id ignored: not a job id", zipMeta))
		m.JobID = ""
	}
	if m.PRNumber < 0 || m.PRNumber > 1<<31 {
		warns = append(warns, fmt.Sprintf("%s: pr_number %d ignored", zipMeta, m.PRNumber))
		m.PRNumber = 0
	}
	kept := m.History[:0:0]
	for i, h := range m.History {
		if h.RunID <= 0 || h.RunID > maxHistoryRuns || h.RunAttempt < 0 || (h.Command != "run" && h.Command != "retry") ||
			h.Total < 0 || h.Successful < 0 || h.Failed < 0 {
			warns = append(warns, fmt.Sprintf("%s: history entry %d ignored: invalid", zipMeta, i))
			continue
		}
		kept = append(kept, h)
	}
	m.History = trimHistory(kept)
	return m, warns
}

// trimHistory keeps the newest maxHistory entries.
func trimHistory(h []historyEntry) []historyEntry {
	if len(h) > maxHistory {
		h = h[len(h)-maxHistory:]
	}
	return h
}

// validCommentKey accepts a plain one-line string: no control or format
// characters, at most maxKeyLen bytes.
func validCommentKey(k string) error {
	if !utf8.ValidString(k) || strings.TrimSpace(k) == "" {
		return fmt.Errorf("not a plain string")
	}
	if len(k) > maxKeyLen {
		return fmt.Errorf("longer than %d bytes", maxKeyLen)
	}
	for _, r := range k {
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			return fmt.Errorf("contains the control or format character %U", r)
		}
	}
	return nil
}

// defaultCommentKey is "<workflow file> / <job>" of this run, e.g.
// "example.yml / fanout" (the workflow's name when its file is unknown).
func (r *actionRun) defaultCommentKey() string {
	ref, _, _ := strings.Cut(r.env.Getenv("GITHUB_WORKFLOW_REF"), "@")
	wf := r.ctx.Workflow
	if ref != "" {
		wf = path.Base(ref)
	}
	return wf + " / " + r.ctx.Job
}

// legacyCommentKeys are the keys an earlier version (or this one without
// the comment-key input) gave the same step's sticky comment: the derived
// key and the format before it (the workflow's name instead of its file,
// until 100e5d7). A comment carrying one of them is taken over and
// re-keyed (ghaction.Sticky.LegacyKeys), so an upgrade or a new
// comment-key never leaves a second comment. A redrive editing the key
// carried by its artifact has none: it must not take over its own
// workflow's comments.
func (r *actionRun) legacyCommentKeys(o *jobOutcome, key string) []string {
	if o.meta.CommentKey != "" && r.commentKey == "" {
		return nil
	}
	var out []string
	for _, k := range []string{r.defaultCommentKey(), r.ctx.Workflow + " / " + r.ctx.Job} {
		if k != key && r.ctx.Job != "" && !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out
}

// renderHistory is the markdown list of the fan-out's runs, built from
// numbers only (the entries may come from an artifact).
func (r *actionRun) renderHistory(h []historyEntry) string {
	if len(h) < 2 { // the original run alone: nothing to tell
		return ""
	}
	var b strings.Builder
	b.WriteString("**Runs of this fan-out**\n\n")
	for _, e := range h {
		run := fmt.Sprintf("run %d", e.RunID)
		if r.ctx.ServerURL != "" && r.owner != "" {
			run = fmt.Sprintf("[run %d](%s/%s/%s/actions/runs/%d)", e.RunID, r.ctx.ServerURL, r.owner, r.repo, e.RunID)
		}
		what := "run"
		if e.Command == "retry" {
			what = "redrive"
		}
		fmt.Fprintf(&b, "- %s %s (attempt %d, %s): %d item(s), %d merged, %d failed\n",
			what, run, max(e.RunAttempt, 1), e.At.UTC().Format("2006-01-02 15:04 UTC"), e.Total, e.Successful, e.Failed)
	}
	return b.String()
}
