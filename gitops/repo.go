package gitops

import (
	"bytes"
	"compress/zlib"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/storage/filesystem"
	"github.com/go-git/go-git/v5/storage/filesystem/dotgit"
)

// objectReader reads refs and objects of one repository in-process with
// go-git's filesystem storage: loose and packed objects, loose and packed
// refs, alternates. It writes only loose objects (the in-process merges'
// trees and commits, inmerge.go). Every answer is "found", "not found"
// or "unknown" (ok=false), and callers ask git on "unknown". go-git's
// storage is not safe for concurrent use, so every access holds mu.
type objectReader struct {
	commonDir string
	mu        sync.Mutex
	st        *filesystem.Storage
	walked    atomic.Int64 // commits visited by the in-process history walks (tests)
	looked    atomic.Int64 // objects importLoose looked up in the repository (tests)
	// written are objects this process wrote (see remember), under mu.
	written map[plumbing.Hash]plumbing.EncodedObject
	zbuf    bytes.Buffer // compressed object being written, under mu
	zw      *zlib.Writer // reused compressor, under mu
	// entries are decoded trees by id (treeEntries), under mu.
	entries map[plumbing.Hash]map[string]treeEntry
}

// objectCacheSize bounds go-git's cache of decoded objects. Its default
// (96 MiB) filled, in a long job, with ever larger versions of the trees
// merges rewrite (a directory every item adds a file to), and held them:
// the engine's peak RSS grew with the number of items. What merges read
// again — the base's and the results tip's trees — is small, the trees
// they decode are kept decoded apart (objectReader.entries), and what this
// process just wrote is kept apart too (objectReader.written): 4 MiB
// costs no CPU measurable at 3,000 items (bench/README, issue 26 item 1)
// and keeps a job's live heap near 16 MiB.
const objectCacheSize = 4 * cache.MiByte

// openPacks is how many pack files go-git keeps open (least recently
// opened closed first). Without it every object read opens and closes its
// pack file: a merge reads hundreds of objects, and a repository that
// gathered many shard bundles has a pack for each.
const openPacks = 16

// openObjects opens the common git dir with go-git, or returns nil when
// the repository uses a format go-git v5 does not read (reftable refs,
// SHA-256 objects, an unknown extension): git then answers everything.
// go-git's own Open refuses extensions it does not implement (worktreeConfig,
// which sparse checkouts set, among them) although they change nothing
// about objects and refs, so the storage is opened directly and the
// extensions are checked here.
func openObjects(commonDir string) *objectReader {
	if _, err := os.Stat(filepath.Join(commonDir, "reftable")); err == nil {
		return nil
	}
	st := filesystem.NewStorageWithOptions(osfs.New(commonDir), cache.NewObjectLRU(objectCacheSize), filesystem.Options{MaxOpenDescriptors: openPacks})
	cfg, err := st.Config()
	if err != nil || cfg.Raw == nil {
		return nil
	}
	if cfg.Raw.HasSection("extensions") {
		for _, opt := range cfg.Raw.Section("extensions").Options {
			v := strings.ToLower(opt.Value)
			switch strings.ToLower(opt.Key) {
			case "noop", "noop-v1", "worktreeconfig", "preciousobjects", "partialclone":
			case "objectformat":
				if v != "sha1" {
					return nil
				}
			case "refstorage":
				if v != "files" {
					return nil
				}
			default:
				return nil
			}
		}
	}
	return &objectReader{commonDir: commonDir, st: st}
}

// refStorage returns a ref store for the worktree whose git dir is gitDir:
// per-worktree refs (HEAD, refs/worktree/, …) from gitDir, the others from
// the common dir. gitDir must belong to this repository (see ownGitDir).
func (o *objectReader) refStorage(gitDir string) storer.ReferenceStorer {
	if gitDir == o.commonDir {
		return o.st
	}
	fs := dotgit.NewRepositoryFilesystem(osfs.New(gitDir), osfs.New(o.commonDir))
	return filesystem.NewStorage(fs, nil)
}

// resolve follows name (and symbolic refs) in the worktree of gitDir to an
// object id. found is false when the ref does not exist; ok is false when
// the answer is unknown.
func (o *objectReader) resolve(gitDir, name string) (oid string, found, ok bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	ref, err := storer.ResolveReference(o.refStorage(gitDir), plumbing.ReferenceName(name))
	switch {
	case errors.Is(err, plumbing.ErrReferenceNotFound):
		return "", false, true
	case err != nil || ref.Type() != plumbing.HashReference:
		return "", false, false
	}
	return ref.Hash().String(), true, true
}

// exists reports whether a ref exists (without resolving it).
func (o *objectReader) exists(name string) (found, ok bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	_, err := o.st.Reference(plumbing.ReferenceName(name))
	switch {
	case errors.Is(err, plumbing.ErrReferenceNotFound):
		return false, true
	case err != nil:
		return false, false
	}
	return true, true
}

// symbolicHEAD returns the target of the worktree's HEAD ("refs/heads/x"),
// or "" if it is detached; ok is false if unknown.
func (o *objectReader) symbolicHEAD(gitDir string) (target string, ok bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	ref, err := o.refStorage(gitDir).Reference(plumbing.HEAD)
	if err != nil {
		return "", false
	}
	if ref.Type() == plumbing.SymbolicReference {
		return ref.Target().String(), true
	}
	return "", true
}

// refs lists the refs whose full names start with prefix, with their ids.
func (o *objectReader) refs(prefix string) (map[string]string, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	it, err := o.st.IterReferences()
	if err != nil {
		return nil, false
	}
	out := map[string]string{}
	err = it.ForEach(func(r *plumbing.Reference) error {
		if strings.HasPrefix(r.Name().String(), prefix) && r.Type() == plumbing.HashReference {
			out[r.Name().String()] = r.Hash().String()
		}
		return nil
	})
	return out, err == nil
}

// commit reads a commit. found is false if no object has that id, ok is
// false if the answer is unknown (a read error, or not a commit).
func (o *objectReader) commit(oid string) (c *object.Commit, ok bool) {
	if !isHexOID(oid) {
		return nil, false
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	c, err := object.GetCommit(o.st, plumbing.NewHash(oid))
	if err != nil {
		// go-git caches the packs' indexes: git may have repacked since
		// (the object moved to a new pack, the old one is gone).
		o.st.Reindex()
		c, err = object.GetCommit(o.st, plumbing.NewHash(oid))
	}
	if err != nil {
		return nil, false
	}
	return c, true
}

// peelCommit returns the commit oid names, following annotated tags; ok is
// false if oid is not a commit or tag of a commit readable here.
func (o *objectReader) peelCommit(oid string) (string, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	h := plumbing.NewHash(oid)
	for range 10 {
		obj, err := object.GetObject(o.st, h)
		if err != nil {
			o.st.Reindex() // see commit
			obj, err = object.GetObject(o.st, h)
		}
		if err != nil {
			return "", false
		}
		switch v := obj.(type) {
		case *object.Commit:
			return v.Hash.String(), true
		case *object.Tag:
			h = v.Target
		default:
			return "", false
		}
	}
	return "", false
}

// tree returns the tree id of a commit.
func (o *objectReader) tree(oid string) (string, bool) {
	c, ok := o.commit(oid)
	if !ok {
		return "", false
	}
	return c.TreeHash.String(), true
}

// parents returns the parent ids of a commit.
func (o *objectReader) parents(oid string) ([]string, bool) {
	c, ok := o.commit(oid)
	if !ok {
		return nil, false
	}
	ps := make([]string, len(c.ParentHashes))
	for i, p := range c.ParentHashes {
		ps[i] = p.String()
	}
	return ps, true
}

// maxWalk bounds the in-process history walks; past it git answers.
const maxWalk = 1000

// commitsSince lists the commits reachable from head but not from base,
// for the common shape of an agent's fresh commits on top of base. ok is
// false (callers ask git) when a commit cannot be read, a root commit is
// reached (head's history is not bounded by base) or the walk grows past
// maxWalk.
func (o *objectReader) commitsSince(head, base string) (commits []string, ok bool) {
	w := o.walkUnmerged(head, func(oid string) bool { return oid == base })
	if !w.complete {
		return nil, false
	}
	return w.walked, true
}

// isAncestor reports whether anc is an ancestor of (or equal to) desc by
// walking desc's history, without entering commits in stop: commits known
// to be ancestors of anc other than anc itself, which cannot lead to anc.
// ok is false when the walk cannot decide within maxWalk commits.
func (o *objectReader) isAncestor(anc, desc string, stop func(string) bool) (yes, ok bool) {
	seen := map[string]bool{}
	queue := []string{desc}
	for len(queue) > 0 {
		oid := queue[0]
		queue = queue[1:]
		if oid == anc {
			return true, true
		}
		if seen[oid] || (stop != nil && stop(oid)) {
			continue
		}
		seen[oid] = true
		o.walked.Add(1)
		if len(seen) > maxWalk {
			return false, false
		}
		parents, ok := o.parents(oid)
		if !ok {
			return false, false
		}
		queue = append(queue, parents...)
	}
	return false, true
}

// worktreeGitDir returns the git dir of the work tree whose top is dir: its
// .git directory, or the directory a "gitdir: <path>" .git file names
// (linked worktrees). ok is false when dir is not the top of a work tree.
func worktreeGitDir(dir string) (string, bool) {
	dotGit := filepath.Join(dir, ".git")
	fi, err := os.Stat(dotGit)
	if err != nil {
		return "", false
	}
	if fi.IsDir() {
		return dotGit, true
	}
	b, err := os.ReadFile(dotGit)
	if err != nil {
		return "", false
	}
	p, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "gitdir: ")
	if !ok {
		return "", false
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(dir, p)
	}
	return filepath.Clean(p), true
}

// ownGitDir returns the git dir of the work tree whose top is dir, if that
// work tree belongs to this repository (its common dir is o's).
func (o *objectReader) ownGitDir(dir string) (string, bool) {
	gitDir, ok := worktreeGitDir(dir)
	if !ok {
		return "", false
	}
	if gitDir == o.commonDir {
		return gitDir, true
	}
	b, err := os.ReadFile(filepath.Join(gitDir, "commondir"))
	if err != nil {
		return "", false
	}
	p := strings.TrimSpace(string(b))
	if !filepath.IsAbs(p) {
		p = filepath.Join(gitDir, p)
	}
	return gitDir, filepath.Clean(p) == o.commonDir
}

func isHexOID(s string) bool {
	if len(s) != 40 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}
