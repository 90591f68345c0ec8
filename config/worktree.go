package config

import (
	"path"
	"strings"
)

// WorktreeConfig is the `worktree:` block: how agent worktrees (and the
// parent worktree) are checked out.
type WorktreeConfig struct {
	// Sparse lists the directories a sparse checkout keeps (cone mode with
	// a sparse index; files at the top level are always checked out), "/"
	// separated and relative to the repository's top level, a trailing "/"
	// dropped. Empty means a full checkout. Commits and merges still hold
	// whole trees: the results branch keeps every file.
	Sparse []string
	// Pos is where the `worktree` key is; SparsePos where each Sparse
	// entry is.
	Pos       Position
	SparsePos []Position
}

// worktree decodes `worktree: {sparse: [dir/, …]}` into w.Worktree.
func (d *decoder) worktree(e entry, w *Workflow) {
	w.Worktree.Pos = d.pos(e.keyNode)
	o := d.object(e.val, e.path)
	if o == nil {
		return
	}
	defer o.finish()
	kv, ok := o.take("sparse")
	if !ok {
		return
	}
	nodes, ok := d.list(kv)
	if !ok {
		return
	}
	seen := map[string]bool{}
	for i, n := range nodes {
		el := item(n, kv.path, i)
		s, ok := d.str(el)
		if !ok {
			continue
		}
		dir, why := sparseDir(s)
		if why != "" {
			d.fail(n, el.path, "%s", why)
			continue
		}
		if seen[dir] {
			d.fail(n, el.path, "%q is listed twice", s)
			continue
		}
		seen[dir] = true
		w.Worktree.Sparse = append(w.Worktree.Sparse, dir)
		w.Worktree.SparsePos = append(w.Worktree.SparsePos, d.pos(n))
	}
}

// sparseDir normalises one sparse directory, or says why it is not one.
// The rules are those of gitops.CleanSparse (config imports no project
// package).
func sparseDir(s string) (string, string) {
	d := strings.TrimSuffix(s, "/")
	switch {
	case d == "" || d == ".":
		return "", "must name a directory of the repository (a full checkout is the default: leave sparse out)"
	case strings.HasPrefix(d, "/"):
		return "", "must be relative to the repository's top level, not absolute"
	case strings.ContainsAny(d, "*?[]\\!"):
		return "", "cone mode takes directory names, not patterns (no *, ?, [, ], !, \\)"
	case strings.IndexFunc(d, func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0:
		return "", "control characters are not allowed"
	case path.Clean(d) != d:
		return "", "not a clean path (write " + path.Clean(d) + "/)"
	}
	for el := range strings.SplitSeq(d, "/") {
		if el == ".." || el == "." || el == ".git" {
			return "", "\"" + el + "\" is not allowed in a sparse directory"
		}
	}
	return d, ""
}
