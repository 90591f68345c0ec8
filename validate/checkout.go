package validate

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/prodigy-action/prodigy-action/config"
)

// Checkout is what a run warns of the user's checkout before it starts:
// agents start from HEAD, so uncommitted changes are not theirs. status is
// the checkout's changes as gitops.StatusSummary gives them ("Kind: path"
// lines), top the repository's top directory. The workflow file itself is
// left out (it is read from the checkout as it is, so its being untracked
// or edited changes nothing the agents see). A changed map.input file is
// named first (its items come from HEAD's version, or are not there at
// all); the last warning lists the changes, at most five. None when the
// checkout is clean.
func Checkout(wf *config.Workflow, top, status string) []string {
	if status == "" {
		return nil
	}
	skip := workflowRelPath(wf.Path, top)
	var lines []string
	for _, l := range strings.Split(status, "\n") {
		if _, path, _ := strings.Cut(l, ": "); skip == "" || path != skip {
			lines = append(lines, l)
		}
	}
	if len(lines) == 0 {
		return nil
	}
	var warnings []string
	in := inputPath(wf.Map.Input, top)
	for _, l := range lines {
		kind, path, _ := strings.Cut(l, ": ")
		if in == "" || (path != in && !strings.HasSuffix(path, " -> "+in)) {
			continue
		}
		if kind == "Untracked" {
			warnings = append(warnings, fmt.Sprintf("map.input %s is not committed: it is read from your checkout, but agents start from HEAD and do not have it", in))
		} else {
			warnings = append(warnings, fmt.Sprintf("map.input %s differs from HEAD (%s): the items come from HEAD's version, not your edits; commit them to use them", in, strings.ToLower(kind)))
		}
	}
	shown := lines
	if len(shown) > 5 {
		shown = append(shown[:5:5], fmt.Sprintf("… and %d more", len(lines)-5))
	}
	return append(warnings, fmt.Sprintf("your checkout %s has %d uncommitted change(s); agents start from HEAD and do not see them: %s",
		top, len(lines), strings.Join(shown, "; ")))
}

// workflowRelPath is the workflow file path relative to the repository top
// (slash-separated), or "" when it is outside it or not a file.
func workflowRelPath(path, top string) string {
	if path == "" {
		return ""
	}
	p, err := filepath.Abs(path)
	if err != nil {
		return ""
	}
	if r, err := filepath.EvalSymlinks(p); err == nil {
		p = r
	}
	if r, err := filepath.EvalSymlinks(top); err == nil {
		top = r
	}
	rel, err := filepath.Rel(top, p)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return ""
	}
	return filepath.ToSlash(rel)
}

// inputPath is map.input relative to the repository top when it names a
// file (not a command), else "".
func inputPath(input, top string) string {
	in := strings.TrimSpace(input)
	if in == "" || strings.ContainsAny(in, " \t|;&$<>()") {
		return ""
	}
	if filepath.IsAbs(in) {
		rel, err := filepath.Rel(top, in)
		if err != nil || strings.HasPrefix(rel, "..") {
			return ""
		}
		in = rel
	}
	return filepath.ToSlash(filepath.Clean(in))
}
