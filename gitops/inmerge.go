package gitops

import (
	"bytes"
	"compress/zlib"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// This file is the in-process half of [Client.MergeTree]: the merge base
// found from what the Client knows about the target ref, a three-way merge
// of trees that only succeeds where no path was changed on both sides, and
// the tree and commit objects written as loose objects (content-addressed
// files: writing one concurrently with git is safe, it is what git does).
// Anything else — a path changed on both sides, an unclear merge base,
// configuration that changes how git writes commits — is left to
// `git merge-tree` and `git commit-tree`, which give the same answers.

// mergeWalk is the history of theirs that is not known to be merged: the
// commits walked (stopping at known ones) and the known commits reached.
type mergeWalk struct {
	walked   []string
	frontier []string
	complete bool // the walk reached only known commits (no root, no limit)
}

// walkUnmerged walks theirs's history in-process, not entering commits in
// known. The walk is complete when every path ended at a known commit.
func (o *objectReader) walkUnmerged(theirs string, known func(string) bool) mergeWalk {
	var w mergeWalk
	seen := map[string]bool{}
	queue := []string{theirs}
	for len(queue) > 0 {
		oid := queue[0]
		queue = queue[1:]
		if seen[oid] {
			continue
		}
		seen[oid] = true
		if known(oid) {
			w.frontier = append(w.frontier, oid)
			continue
		}
		if len(w.walked) >= maxWalk {
			return w
		}
		o.walked.Add(1)
		parents, ok := o.parents(oid)
		if !ok || len(parents) == 0 {
			return w // unreadable, or a root: history not bounded by known commits
		}
		w.walked = append(w.walked, oid)
		queue = append(queue, parents...)
	}
	w.complete = true
	return w
}

// errConflictInProcess is the in-process merge giving up: a path was
// changed on both sides (git decides, and reports the conflict if any).
var errConflictInProcess = errors.New("a path changed on both sides")

// treeEntry is one entry of a tree: mode and object id.
type treeEntry struct {
	mode filemode.FileMode
	hash plumbing.Hash
}

// mergeTrees merges the trees theirs and ours with base as their common
// ancestor, writing the new trees, and returns the merged tree id. It fails
// with errConflictInProcess when a path was changed on both sides
// differently, unless both are directories (merged entry by entry).
func (o *objectReader) mergeTrees(base, ours, theirs plumbing.Hash) (plumbing.Hash, error) {
	switch {
	case ours == theirs, base == theirs:
		return ours, nil
	case base == ours:
		return theirs, nil
	}
	b, err := o.treeEntries(base)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	ou, err := o.treeEntries(ours)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	th, err := o.treeEntries(theirs)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	names := make(map[string]bool, len(ou)+len(th))
	for _, m := range []map[string]treeEntry{b, ou, th} {
		for n := range m {
			names[n] = true
		}
	}
	var out []object.TreeEntry
	for name := range names {
		be, inB := b[name]
		oe, inO := ou[name]
		te, inT := th[name]
		var e treeEntry
		var keep bool
		switch {
		case inO == inT && oe == te:
			e, keep = oe, inO
		case inB == inO && be == oe:
			e, keep = te, inT
		case inB == inT && be == te:
			e, keep = oe, inO
		case inO && inT && oe.mode == filemode.Dir && te.mode == filemode.Dir && (!inB || be.mode == filemode.Dir):
			baseTree := plumbing.ZeroHash // an empty tree
			if inB {
				baseTree = be.hash
			}
			h, err := o.mergeTrees(baseTree, oe.hash, te.hash)
			if err != nil {
				return plumbing.ZeroHash, err
			}
			if h == emptyTree {
				continue // git leaves no empty directories in a tree
			}
			e, keep = treeEntry{filemode.Dir, h}, true
		default:
			return plumbing.ZeroHash, errConflictInProcess
		}
		if keep {
			out = append(out, object.TreeEntry{Name: name, Mode: e.mode, Hash: e.hash})
		}
	}
	return o.writeTree(out)
}

// emptyTree is the id of the tree with no entries.
var emptyTree = plumbing.NewHash("4b825dc642cb6eb9a060e54bf8d69288fbee4904")

// treeEntries reads a tree's entries by name; the zero hash is the empty
// tree. The map is shared (entriesCache): callers only read it. o.mu is
// held.
func (o *objectReader) treeEntries(h plumbing.Hash) (map[string]treeEntry, error) {
	if h.IsZero() || h == emptyTree {
		return map[string]treeEntry{}, nil
	}
	if m, ok := o.entries[h]; ok {
		return m, nil
	}
	t, err := o.readTree(h)
	if err != nil {
		return nil, fmt.Errorf("read tree %s: %w", h, err)
	}
	m := make(map[string]treeEntry, len(t.Entries))
	for _, e := range t.Entries {
		m[e.Name] = treeEntry{e.Mode, e.Hash}
	}
	o.cacheEntries(h, m)
	return m, nil
}

// entriesCacheSize bounds the decoded trees treeEntries keeps: a merge
// reads its base's trees, which an earlier merge wrote or read a moment
// before, and the parent's trees an import compares with.
const entriesCacheSize = 32

// cacheEntries keeps a decoded tree (dropping all when full); o.mu is held.
func (o *objectReader) cacheEntries(h plumbing.Hash, m map[string]treeEntry) {
	if o.entries == nil || len(o.entries) >= entriesCacheSize {
		o.entries = map[plumbing.Hash]map[string]treeEntry{}
	}
	o.entries[h] = m
}

// writeTree writes a tree object of entries (in git's order: names
// compared as if directories ended with '/').
func (o *objectReader) writeTree(entries []object.TreeEntry) (plumbing.Hash, error) {
	if len(entries) == 0 {
		return emptyTree, nil
	}
	key := func(e object.TreeEntry) string {
		if e.Mode == filemode.Dir {
			return e.Name + "/"
		}
		return e.Name
	}
	slices.SortFunc(entries, func(a, b object.TreeEntry) int { return strings.Compare(key(a), key(b)) })
	var buf bytes.Buffer
	m := make(map[string]treeEntry, len(entries))
	for _, e := range entries {
		buf.WriteString(strconv.FormatUint(uint64(e.Mode), 8))
		buf.WriteByte(' ')
		buf.WriteString(e.Name)
		buf.WriteByte(0)
		buf.Write(e.Hash[:])
		m[e.Name] = treeEntry{e.Mode, e.Hash}
	}
	h, err := o.writeObject(plumbing.TreeObject, buf.Bytes())
	if err == nil {
		o.cacheEntries(h, m) // the next merge's ours, a later one's base
	}
	return h, err
}

// writeObject stores a loose object the way git does — zlib-compressed
// "<type> <size>\0<data>" written to a temporary file in its fan-out
// directory, then renamed to objects/xx/<rest of id> — and returns its id;
// o.mu is held. (go-git's writer makes a temporary file elsewhere and
// creates directories on every call: twice the system calls.)
func (o *objectReader) writeObject(t plumbing.ObjectType, data []byte) (plumbing.Hash, error) {
	h := plumbing.ComputeHash(t, data)
	hex := h.String()
	o.zbuf.Reset()
	if o.zw == nil {
		o.zw, _ = zlib.NewWriterLevel(&o.zbuf, zlib.BestSpeed)
	} else {
		o.zw.Reset(&o.zbuf)
	}
	fmt.Fprintf(o.zw, "%s %d\x00", t, len(data))
	_, _ = o.zw.Write(data)
	if err := o.zw.Close(); err != nil {
		return plumbing.ZeroHash, fmt.Errorf("write %s object: %w", t, err)
	}
	dir := filepath.Join(o.commonDir, "objects", hex[:2])
	tmp, err := writeObjectTemp(dir, o.zbuf.Bytes())
	if errors.Is(err, fs.ErrNotExist) {
		if err = os.Mkdir(dir, 0o755); err == nil || errors.Is(err, fs.ErrExist) {
			tmp, err = writeObjectTemp(dir, o.zbuf.Bytes())
		}
	}
	if err == nil {
		if err = os.Rename(tmp, filepath.Join(dir, hex[2:])); err != nil {
			_ = os.Remove(tmp)
		}
	}
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("write %s object: %w", t, err)
	}
	o.remember(h, t, data)
	return h, nil
}

// tempSeq numbers this process's temporary object files.
var tempSeq atomic.Uint64

// writeObjectTemp writes data to a new read-only file tmp_obj_<pid>_<n>
// in dir and returns its path.
func writeObjectTemp(dir string, data []byte) (string, error) {
	for {
		path := filepath.Join(dir, fmt.Sprintf("tmp_obj_%d_%d", os.Getpid(), tempSeq.Add(1)))
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o444)
		if errors.Is(err, fs.ErrExist) {
			continue // left by an earlier process with our pid
		}
		if err != nil {
			return "", err
		}
		_, err = f.Write(data)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			_ = os.Remove(path)
			return "", err
		}
		return path, nil
	}
}

// remember keeps the trees and commits this process wrote (the next merge
// reads them back); the cache is dropped when it grows past 64 objects.
func (o *objectReader) remember(h plumbing.Hash, t plumbing.ObjectType, data []byte) {
	if o.written == nil || len(o.written) >= 64 {
		o.written = map[plumbing.Hash]plumbing.EncodedObject{}
	}
	obj := &plumbing.MemoryObject{}
	obj.SetType(t)
	_, _ = obj.Write(data)
	o.written[h] = obj
}

// readTree reads a tree, from what this process wrote first; o.mu is held.
func (o *objectReader) readTree(h plumbing.Hash) (*object.Tree, error) {
	if obj, ok := o.written[h]; ok && obj.Type() == plumbing.TreeObject {
		return object.DecodeTree(o.st, obj)
	}
	return object.GetTree(o.st, h)
}

// readCommitTree returns a commit's tree id, from what this process wrote
// first; o.mu is held.
func (o *objectReader) readCommitTree(h plumbing.Hash) (plumbing.Hash, error) {
	if obj, ok := o.written[h]; ok && obj.Type() == plumbing.CommitObject {
		c, err := object.DecodeCommit(o.st, obj)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		return c.TreeHash, nil
	}
	c, err := object.GetCommit(o.st, h)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	return c.TreeHash, nil
}

// mergeInProcess merges theirs into old (base is their only merge base)
// and writes the tree; ok is false when git must decide.
func (o *objectReader) mergeInProcess(base, old, theirs string) (tree string, ok bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	var trees [3]plumbing.Hash
	for i, oid := range []string{base, old, theirs} {
		t, err := o.readCommitTree(plumbing.NewHash(oid))
		if err != nil {
			return "", false
		}
		trees[i] = t
	}
	h, err := o.mergeTrees(trees[0], trees[1], trees[2])
	if err != nil {
		return "", false
	}
	return h.String(), true
}

// commitIdent is how git would sign a commit made now: author and
// committer name and email, or usable=false when this package must let
// `git commit-tree` write the commit (a fixed date in the environment,
// commit signing, a non-UTF-8 commit encoding).
type commitIdent struct {
	author, committer object.Signature
	usable            bool
}

// commitIdentity asks git once (`git var -l`, with [Client.IdentityEnv])
// which identity and configuration a merge commit gets, and caches it.
func (c *Client) commitIdentity(ctx context.Context) (commitIdent, error) {
	c.identMu.Lock()
	defer c.identMu.Unlock()
	if c.identOK {
		return c.ident, nil
	}
	idEnv, err := c.IdentityEnv(ctx)
	if err != nil {
		return commitIdent{}, err
	}
	out, err := c.run(ctx, c.top, idEnv, nil, "var", "-l")
	if err != nil {
		return commitIdent{}, fmt.Errorf("read commit identity: %w", err)
	}
	id := commitIdent{usable: true}
	var haveAuthor, haveCommitter bool
	for _, line := range strings.Split(out, "\n") {
		k, v, _ := strings.Cut(line, "=")
		switch strings.ToLower(k) {
		case "git_author_ident":
			id.author, haveAuthor = parseIdent(v)
		case "git_committer_ident":
			id.committer, haveCommitter = parseIdent(v)
		case "commit.gpgsign":
			if b, err := strconv.ParseBool(v); err != nil || b || v == "" {
				id.usable = false
			}
		case "i18n.commitencoding":
			if !strings.EqualFold(v, "utf-8") && !strings.EqualFold(v, "utf8") {
				id.usable = false
			}
		}
	}
	for _, kv := range append(c.Env(), idEnv...) {
		if k, _, _ := strings.Cut(kv, "="); k == "GIT_AUTHOR_DATE" || k == "GIT_COMMITTER_DATE" {
			id.usable = false
		}
	}
	id.usable = id.usable && haveAuthor && haveCommitter
	c.ident, c.identOK = id, true
	return id, nil
}

// parseIdent reads "Name <email> 1700000000 +0000" (git var's format).
func parseIdent(s string) (object.Signature, bool) {
	i, j := strings.LastIndexByte(s, '<'), strings.LastIndexByte(s, '>')
	if i < 1 || j < i || s[i-1] != ' ' {
		return object.Signature{}, false
	}
	return object.Signature{Name: s[:i-1], Email: s[i+1 : j]}, true
}

// writeMergeCommit writes the commit `git commit-tree tree -p old -p
// theirs -m message` would write now, in-process; ok is false when the
// identity says git must write it.
func (c *Client) writeMergeCommit(ctx context.Context, tree, old, theirs, message string) (string, bool, error) {
	id, err := c.commitIdentity(ctx)
	if err != nil || !id.usable || !utf8.ValidString(message) || strings.IndexByte(message, 0) >= 0 {
		return "", false, err
	}
	if !strings.HasSuffix(message, "\n") {
		message += "\n" // as commit-tree -m does
	}
	now := time.Now()
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "tree %s\nparent %s\nparent %s\n", tree, old, theirs)
	sig := func(role string, s object.Signature) {
		fmt.Fprintf(&buf, "%s %s <%s> %d %s\n", role, s.Name, s.Email, now.Unix(), now.Format("-0700"))
	}
	sig("author", id.author)
	sig("committer", id.committer)
	buf.WriteByte('\n')
	buf.WriteString(message)
	c.objects.mu.Lock()
	h, err := c.objects.writeObject(plumbing.CommitObject, buf.Bytes())
	c.objects.mu.Unlock()
	if err != nil {
		return "", false, err
	}
	return h.String(), true, nil
}
