package gitops

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/format/objfile"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// maxImportObject bounds an object importLoose reads into memory; a
// larger one goes through git (importObjects).
const maxImportObject = 64 << 20

// errNotLoose says importLoose met an object it does not read itself (in
// a pack of the agent's, a tag, too large): git imports the commit.
var errNotLoose = errors.New("not a loose object importLoose reads")

// importCommit copies the agent's commit and what it needs into the
// repository: in-process when its new objects are loose (importLoose),
// else with git (importObjects).
func (c *Client) importCommit(ctx context.Context, objects, theirs, base string) error {
	if c.objects != nil {
		err := c.objects.importLoose(objects, theirs)
		if !errors.Is(err, errNotLoose) {
			return err
		}
	}
	return c.importObjects(ctx, objects, theirs, base)
}

// importObjects copies into the repository the objects reachable from
// theirs and not from base, read from the repository plus objects (an
// agent's object directory, as an alternate of this process only):
// `git pack-objects --revs` piped into `git unpack-objects --strict`, which
// recomputes every object's id and refuses objects that name missing ones.
func (c *Client) importObjects(ctx context.Context, objects, theirs, base string) error {
	if !isHexOID(theirs) || !isHexOID(base) {
		return fmt.Errorf("import %q: not a commit id", theirs)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pack := c.cmdCtx(ctx, c.gitPath, "-C", c.top, "pack-objects", "--revs", "--stdout", "-q", "--window=0")
	pack.Env = append(append([]string(nil), c.env...), "GIT_ALTERNATE_OBJECT_DIRECTORIES="+quoteAlternate(objects))
	pack.Stdin = strings.NewReader(theirs + "\n^" + base + "\n")
	unpack := c.cmdCtx(ctx, c.gitPath, "-C", c.top, "unpack-objects", "-q", "--strict")
	unpack.Env = c.env
	pr, pw, err := os.Pipe()
	if err != nil {
		return err
	}
	var packErr, unpackErr bytes.Buffer
	pack.Stdout, pack.Stderr = pw, &packErr
	unpack.Stdin, unpack.Stderr = pr, &unpackErr
	if err := unpack.Start(); err != nil {
		pr.Close()
		pw.Close()
		return fmt.Errorf("import the agent's objects: %w", err)
	}
	pr.Close()
	perr := pack.Run()
	pw.Close()
	uerr := unpack.Wait()
	// unpack-objects stops at the first bad object, and pack-objects then
	// dies writing to the closed pipe: the cause is unpack's.
	brokenPipe := perr != nil && strings.Contains(perr.Error(), "broken pipe")
	switch {
	case perr != nil && !(brokenPipe && uerr != nil):
		return fmt.Errorf("read the agent's commit %s: %w: %s", theirs, perr, strings.TrimSpace(packErr.String()))
	case uerr != nil:
		return fmt.Errorf("store the agent's objects: %w: %s", uerr, strings.TrimSpace(unpackErr.String()))
	}
	if ok, err := c.CommitExists(ctx, theirs); err != nil || !ok {
		return fmt.Errorf("the agent's commit %s is not in the repository after the import", theirs)
	}
	return nil
}

// importLoose copies into the repository the objects reachable from
// theirs that it lacks, reading them as loose objects of the agent's
// object directory objects — the usual shape of an agent's fresh commits —
// in-process: no git runs. Every object's id is recomputed from what is
// read (a mismatch is an error: corrupt or forged), symbolic links are not
// followed, and objects are written leaves first, so an object in the
// repository always has what it names. It returns errNotLoose when it
// cannot do the import this way (the caller then runs git); nothing it
// wrote is then wrong, only possibly unreferenced.
//
// Its cost follows what the agent changed, not the size of the trees: a
// new tree is read beside the same path's tree in the commit's first
// parent when the repository has that parent, and an entry naming the
// same object as the parent's entry is known to be present (the
// repository holds the parent and, leaves first, all it names) without
// looking it up. So an agent that adds one file to a directory of 10,000
// costs one in-memory comparison, not 10,000 object lookups.
func (o *objectReader) importLoose(objects, theirs string) error {
	if !isHexOID(theirs) {
		return fmt.Errorf("import %q: not a commit id", theirs)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	type pending struct {
		h    plumbing.Hash
		t    plumbing.ObjectType
		data []byte
	}
	// next is an object to import and, for a tree, the same path's tree in
	// the first parent (zero: none known).
	type next struct{ h, counterpart plumbing.Hash }
	var later []pending // trees and commits, written after what they name
	seen := map[plumbing.Hash]bool{}
	stack := []next{{h: plumbing.NewHash(theirs)}}
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		h := n.h
		if seen[h] {
			continue
		}
		seen[h] = true
		o.looked.Add(1)
		if o.st.HasEncodedObject(h) == nil {
			continue
		}
		t, data, err := readLooseObject(objects, h)
		if err != nil {
			return err
		}
		switch t {
		case plumbing.BlobObject:
			if _, err := o.writeObject(t, data); err != nil {
				return err
			}
			continue
		case plumbing.CommitObject:
			var c object.Commit
			if err := c.Decode(memoryObject(t, data)); err != nil {
				return fmt.Errorf("the agent's commit %s: %w", h, err)
			}
			var counterpart plumbing.Hash
			if len(c.ParentHashes) > 0 && o.st.HasEncodedObject(c.ParentHashes[0]) == nil {
				if pt, err := o.readCommitTree(c.ParentHashes[0]); err == nil {
					counterpart = pt
				}
			}
			stack = append(stack, next{c.TreeHash, counterpart})
			for _, p := range c.ParentHashes {
				stack = append(stack, next{h: p})
			}
		case plumbing.TreeObject:
			var tr object.Tree
			if err := tr.Decode(memoryObject(t, data)); err != nil {
				return fmt.Errorf("the agent's tree %s: %w", h, err)
			}
			var known map[string]treeEntry
			if !n.counterpart.IsZero() {
				known, _ = o.treeEntries(n.counterpart) // unreadable: nothing known
			}
			for _, e := range tr.Entries {
				if e.Mode == filemode.Submodule {
					continue
				}
				k, ok := known[e.Name]
				if ok && k.hash == e.Hash {
					continue // the parent's: present with all it names
				}
				var sub plumbing.Hash
				if ok && k.mode == filemode.Dir && e.Mode == filemode.Dir {
					sub = k.hash
				}
				stack = append(stack, next{e.Hash, sub})
			}
		default:
			return errNotLoose
		}
		later = append(later, pending{h, t, data})
	}
	for i := len(later) - 1; i >= 0; i-- {
		if _, err := o.writeObject(later[i].t, later[i].data); err != nil {
			return err
		}
	}
	return nil
}

// readLooseObject reads loose object h of an object directory, checking
// that its content hashes to h. errNotLoose: it is not there as a regular
// file, or is larger than maxImportObject.
func readLooseObject(objects string, h plumbing.Hash) (plumbing.ObjectType, []byte, error) {
	hex := h.String()
	p := filepath.Join(objects, hex[:2], hex[2:])
	fi, err := os.Lstat(p)
	if err != nil || !fi.Mode().IsRegular() {
		return 0, nil, errNotLoose
	}
	f, err := os.Open(p)
	if err != nil {
		return 0, nil, errNotLoose
	}
	defer f.Close()
	r, err := objfile.NewReader(f)
	if err != nil {
		return 0, nil, fmt.Errorf("the agent's object %s is corrupt: %w", hex, err)
	}
	defer r.Close()
	t, size, err := r.Header()
	if err != nil {
		return 0, nil, fmt.Errorf("the agent's object %s is corrupt: %w", hex, err)
	}
	if size < 0 || size > maxImportObject {
		return 0, nil, errNotLoose
	}
	data := make([]byte, size)
	if _, err := io.ReadFull(r, data); err != nil {
		return 0, nil, fmt.Errorf("the agent's object %s is corrupt: %w", hex, err)
	}
	if got := plumbing.ComputeHash(t, data); got != h {
		return 0, nil, fmt.Errorf("the agent's object %s is corrupt: its content is object %s", hex, got)
	}
	return t, data, nil
}

// memoryObject wraps data as an encoded object for go-git's decoders.
func memoryObject(t plumbing.ObjectType, data []byte) plumbing.EncodedObject {
	obj := &plumbing.MemoryObject{}
	obj.SetType(t)
	_, _ = obj.Write(data)
	return obj
}
