package gitops

import (
	"context"
	"fmt"
	"strings"
)

// CommitsSince returns the commits reachable from HEAD in dir but not from
// base (`git rev-list base..HEAD`), newest first; nil if there are none.
func (c *Client) CommitsSince(ctx context.Context, dir, base string) ([]string, error) {
	// The usual shape (a few fresh commits on top of base) is walked
	// in-process; anything unusual falls back to rev-list.
	if head, err := c.Head(ctx, dir); err == nil && isHexOID(base) && c.objects != nil {
		if commits, ok := c.objects.commitsSince(head, base); ok {
			return commits, nil
		}
	}
	out, err := c.run(ctx, dir, nil, nil, "rev-list", base+"..HEAD", "--")
	if err != nil {
		return nil, fmt.Errorf("commits since %s in %s: %w", base, dir, err)
	}
	if commits := strings.Fields(out); len(commits) > 0 {
		return commits, nil
	}
	return nil, nil
}

// StatusSummary describes the uncommitted changes in dir, one line per path
// in git's path order, as "<Kind>: <path>" where Kind is Added, Modified,
// Deleted, Renamed ("old -> new"), Copied, TypeChanged, Conflicted or
// Untracked; for example "Modified: a.go\nUntracked: b.txt". Staged and
// unstaged changes of one path give one line (the staged kind wins, except
// that a conflict is always Conflicted). Ignored files are not listed. A
// clean dir gives "". The text is meant for humans (DLQ
// worktree_artifacts.uncommitted_changes).
func (c *Client) StatusSummary(ctx context.Context, dir string) (string, error) {
	out, err := c.run(ctx, dir, []string{"GIT_OPTIONAL_LOCKS=0"}, nil,
		"status", "--porcelain=v1", "-z", "--untracked-files=all", "--renames")
	if err != nil {
		return "", fmt.Errorf("status of %s: %w", dir, err)
	}
	return formatStatus(out), nil
}

// formatStatus turns `git status --porcelain=v1 -z` output into summary
// lines.
func formatStatus(out string) string {
	fields := strings.Split(out, "\x00")
	var lines []string
	for i := 0; i < len(fields); i++ {
		f := fields[i]
		if len(f) < 4 {
			continue
		}
		x, y, path := f[0], f[1], f[3:]
		kind := statusKind(x, y)
		if x == 'R' || x == 'C' || y == 'R' || y == 'C' {
			// -z: the source path follows as the next field.
			if i+1 < len(fields) {
				path = fields[i+1] + " -> " + path
				i++
			}
		}
		lines = append(lines, kind+": "+path)
	}
	return strings.Join(lines, "\n")
}

func statusKind(x, y byte) string {
	switch {
	case x == '?' && y == '?':
		return "Untracked"
	case x == '!' && y == '!':
		return "Ignored"
	case x == 'U' || y == 'U' || x == 'A' && y == 'A' || x == 'D' && y == 'D':
		return "Conflicted"
	}
	for _, k := range []byte{x, y} {
		switch k {
		case 'A':
			return "Added"
		case 'M':
			return "Modified"
		case 'D':
			return "Deleted"
		case 'R':
			return "Renamed"
		case 'C':
			return "Copied"
		case 'T':
			return "TypeChanged"
		}
	}
	return "Changed"
}
