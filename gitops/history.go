package gitops

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/object"
)

// Commit is a commit as read from the object store.
type Commit struct {
	// ID is the commit's object id.
	ID string
	// Parents are the parent ids, first parent first.
	Parents []string
	// Message is the full commit message.
	Message string
}

// Trailers returns the commit's trailers (see [ParseTrailers]).
func (c Commit) Trailers() []Trailer { return ParseTrailers(c.Message) }

// FirstParentLog returns the commits on tip's first-parent chain, newest
// first, stopping before stop (a commit id; "" means no stop) and after
// limit commits (0 means no limit). Merges made by [Client.MergeTree] and
// [Client.MergeNoFF] into a branch are exactly that branch's first-parent
// chain. It reads objects in-process and falls back to `git log
// --first-parent` when the repository is not readable by go-git.
func (c *Client) FirstParentLog(ctx context.Context, tip, stop string, limit int) ([]Commit, error) {
	start, err := c.ResolveRef(ctx, tip)
	if err != nil {
		return nil, fmt.Errorf("log %s: %w", tip, err)
	}
	if c.objects != nil {
		if log, ok := c.firstParentInProcess(start, stop, limit); ok {
			return log, nil
		}
	}
	args := []string{"log", "--first-parent", "-z", "--format=%H%x1f%P%x1f%B"}
	if limit > 0 {
		args = append(args, fmt.Sprintf("--max-count=%d", limit))
	}
	args = append(args, "--end-of-options", start)
	if stop != "" {
		args = append(args, "^"+stop)
	}
	args = append(args, "--")
	out, err := c.run(ctx, c.top, nil, nil, args...)
	if err != nil {
		return nil, fmt.Errorf("log %s: %w", tip, err)
	}
	var log []Commit
	for _, rec := range strings.Split(out, "\x00") {
		f := strings.SplitN(rec, "\x1f", 3)
		if len(f) != 3 {
			continue
		}
		log = append(log, Commit{ID: f[0], Parents: strings.Fields(f[1]), Message: f[2]})
	}
	return log, nil
}

func (c *Client) firstParentInProcess(start, stop string, limit int) ([]Commit, bool) {
	var log []Commit
	for oid := start; oid != "" && oid != stop && (limit <= 0 || len(log) < limit); {
		cm, ok := c.objects.commit(oid)
		if !ok {
			return nil, false
		}
		entry := Commit{ID: oid, Message: cm.Message}
		for _, p := range cm.ParentHashes {
			entry.Parents = append(entry.Parents, p.String())
		}
		log = append(log, entry)
		oid = ""
		if len(entry.Parents) > 0 {
			oid = entry.Parents[0]
		}
	}
	return log, true
}

// Trailer is one "Key: value" line of a commit message's trailer block.
type Trailer struct {
	Key, Value string
}

var trailerLine = regexp.MustCompile(`^([A-Za-z0-9][A-Za-z0-9-]*)[ \t]*:[ \t]*(.*)$`)

// ParseTrailers returns the trailers of a commit message: the lines of its
// last paragraph when every line there is "Key: value" (continuation lines
// starting with whitespace extend the previous value). A subject alone has
// no trailers. This is stricter than git's interpret-trailers, which also
// accepts a block where only a quarter of the lines are trailers: a
// paragraph of prose that merely contains a colon is never taken for
// trailers.
func ParseTrailers(message string) []Trailer {
	paras := strings.Split(strings.TrimRight(strings.ReplaceAll(message, "\r\n", "\n"), "\n \t"), "\n\n")
	if len(paras) < 2 {
		return nil
	}
	var out []Trailer
	for _, line := range strings.Split(strings.Trim(paras[len(paras)-1], "\n"), "\n") {
		if (strings.HasPrefix(line, " ") || strings.HasPrefix(line, "\t")) && len(out) > 0 {
			out[len(out)-1].Value += " " + strings.TrimSpace(line)
			continue
		}
		m := trailerLine.FindStringSubmatch(line)
		if m == nil {
			return nil
		}
		out = append(out, Trailer{Key: m[1], Value: strings.TrimSpace(m[2])})
	}
	return out
}

// TrailerValues returns the values of the trailers named key
// (case-insensitive), in order.
func TrailerValues(trailers []Trailer, key string) []string {
	var vals []string
	for _, t := range trailers {
		if strings.EqualFold(t.Key, key) {
			vals = append(vals, t.Value)
		}
	}
	return vals
}

// ListFiles returns the paths of the files (blobs and symlinks, recursively)
// in rev's tree under dir ("" for the whole tree), sorted.
func (c *Client) ListFiles(ctx context.Context, rev, dir string) ([]string, error) {
	oid, err := c.ResolveRef(ctx, rev)
	if err != nil {
		return nil, fmt.Errorf("list files of %s: %w", rev, err)
	}
	dir = strings.Trim(dir, "/")
	if c.objects != nil {
		if files, ok := c.objects.files(oid, dir); ok {
			return files, nil
		}
	}
	args := []string{"ls-tree", "-r", "-z", "--name-only", "--end-of-options", oid}
	if dir != "" {
		args = append(args, "--", dir)
	}
	out, err := c.run(ctx, c.top, nil, nil, args...)
	if err != nil {
		return nil, fmt.Errorf("list files of %s: %w", rev, err)
	}
	files := sortedUnique(strings.Split(out, "\x00"))
	return files, nil
}

func (o *objectReader) files(oid, dir string) ([]string, bool) {
	cm, ok := o.commit(oid)
	if !ok {
		return nil, false
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	tree, err := cm.Tree()
	if err != nil {
		return nil, false
	}
	var files []string
	err = tree.Files().ForEach(func(f *object.File) error {
		if dir == "" || strings.HasPrefix(f.Name, dir+"/") {
			files = append(files, f.Name)
		}
		return nil
	})
	if err != nil {
		return nil, false
	}
	sort.Strings(files)
	return files, true
}

// LogGraph returns `git log --graph --oneline` of rev, for humans.
func (c *Client) LogGraph(ctx context.Context, rev string) (string, error) {
	out, err := c.run(ctx, c.top, nil, nil, "log", "--graph", "--oneline", "--decorate=no", "--end-of-options", rev, "--")
	if err != nil {
		return "", fmt.Errorf("log %s: %w", rev, err)
	}
	return out, nil
}
