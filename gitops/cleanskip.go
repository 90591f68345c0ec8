package gitops

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/maphash"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// This file is the in-process `git clean -ffdx` of [Client.CleanWorktree]:
// every path of a worktree that its index does not hold — untracked,
// ignored, an empty directory, a nested repository — is found by reading
// the index and the directories, and deleted (issue 14: clean in
// proportion to what an attempt left, not to the repository; outside
// Linux git deletes it, see deletesInProcess). Anything it
// does not vouch for — an index git may have changed in a way this small
// reader does not read (a sparse index, skip-worktree or conflicted
// entries, a future version), a tracked file that became a directory or a
// tracked directory that became a file, an unreadable directory, a path it
// could not delete — is left to git.
//
// Directories are not all read every time (issue 26: at 10,000 files a
// full walk costs as much as the git process it replaces). After a clean,
// each directory that held exactly what the index holds there is
// remembered by its stamp — inode and change time (ctime), which the
// kernel sets on every entry added, removed or renamed in it and which no
// process can set back (utimes sets the modification time, and the change
// time to now) — and by a keyed hash of its entries. The next clean of the
// worktree lists a remembered directory again only if its stamp or the
// index's entries there differ; it still looks at (lstat) every directory
// the index holds. A directory changed within [racyStamp] of the moment it
// was looked at is not remembered (a later change could leave the same
// change time on a file system that keeps it coarsely), and stamps are
// kept only on local file systems known to keep change times (ext2/3/4,
// XFS, Btrfs, tmpfs; see stamp_linux.go): elsewhere every directory is
// listed every time.

// racyStamp is how long before a look at a directory its last change must
// be for its stamp to be trusted at the next clean: well beyond the tick
// of the kernel's coarse clock (at most 10 ms), which file systems with
// nanosecond timestamps stamp changes with. racyWholeSecond is the same
// for a change time with no fraction of a second, which may come from a
// file system that keeps whole seconds.
const (
	racyStamp       = 100 * time.Millisecond
	racyWholeSecond = 2 * time.Second
)

// dirStamp is what identifies a directory's list of entries between two
// cleans: its inode and change time.
type dirStamp struct {
	ino       uint64
	sec, nsec int64
}

// cleanDir is a directory found clean: its stamp when it was listed and the
// keyed hash of its entries (name and kind) then.
type cleanDir struct {
	stamp dirStamp
	sum   uint64
}

// cleanMemo is what a Client remembers of the worktrees it cleaned, per
// worktree (absolute path): the directories found clean, by path relative
// to it ("" the top).
type cleanMemo struct {
	seed  maphash.Seed
	mu    sync.Mutex
	dirs  map[string]map[string]cleanDir
	reads atomic.Int64 // directories listed (tests)
}

// entryKind is what the index holds at a path: a file (regular or symbolic
// link), a gitlink (a submodule's commit) or a directory of entries.
type entryKind byte

const (
	kindFile entryKind = iota + 1
	kindGitlink
	kindDir
)

// indexEntry is one path of the index and whether it is a gitlink.
type indexEntry struct {
	name    string
	gitlink bool
}

// cleanInProcess deletes, in the worktree dir, everything `git clean -ffdx`
// would delete, and reports whether it did: false means "run git" (see the
// comment at the top of this file), and then nothing is remembered of dir.
func (c *Client) cleanInProcess(dir string) bool {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return false
	}
	gitDir, ok := worktreeGitDir(dir)
	if !ok {
		return false
	}
	data, err := os.ReadFile(filepath.Join(gitDir, "index"))
	if err != nil {
		return false
	}
	entries, ok := indexEntries(data)
	memo := c.cleaned
	old := memo.take(dir)
	if !ok {
		return false
	}
	w := &cleanWalk{
		top: dir, entries: entries, memo: memo, old: old,
		now:    c.now(),
		stamps: stampsKept(dir),
		found:  map[string]cleanDir{},
		stack:  make([]child, len(entries)+64),
	}
	if !w.walk("", 0, len(entries)) {
		return false
	}
	if len(w.remove) > 0 && !deletesInProcess {
		return false
	}
	if len(w.remove) > 0 {
		root, err := os.OpenRoot(dir)
		if err != nil {
			return false
		}
		defer root.Close()
		for _, rel := range w.remove {
			// Within dir only: a symbolic link is deleted, never followed.
			if err := root.RemoveAll(rel); err != nil {
				return false
			}
		}
	}
	memo.put(dir, w.found)
	return true
}

// cleanWalk is one in-process clean of the worktree top.
type cleanWalk struct {
	top     string
	entries []indexEntry // sorted by name, as in the index
	memo    *cleanMemo
	old     map[string]cleanDir // remembered from the last clean
	now     time.Time           // when the clean started
	stamps  bool                // the file system keeps change times
	found   map[string]cleanDir // remembered for the next clean
	remove  []string            // to delete, relative to top
	// stack holds the children of the directories being walked: a
	// directory's are at most its entries, and are dropped when its walk
	// returns (sp is the first free place).
	stack []child
	sp    int
}

// child is one entry of a directory as the index holds it; lo and hi
// bound a directory's entries in cleanWalk.entries.
type child struct {
	name   string
	kind   entryKind
	lo, hi int
}

// walk checks the directory rel (relative to top, "" the top), which holds
// entries[lo:hi] of the index, and the index's directories under it,
// adding what the index does not hold to w.remove. false: git decides.
func (w *cleanWalk) walk(rel string, lo, hi int) bool {
	path := w.top
	if rel != "" {
		path = filepath.Join(w.top, filepath.FromSlash(rel))
	}
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist) && rel != "":
		return true // every tracked file under it is deleted: nothing to clean
	case err != nil || !fi.IsDir():
		return false
	}
	prefix := ""
	if rel != "" {
		prefix = rel + "/"
	}
	sp := w.sp
	kids := w.children(prefix, lo, hi)
	defer func() { w.sp = sp }()
	sum := w.sum(kids)
	stamp, stamped := dirStampOf(fi)
	trusted := w.stamps && stamped && w.settled(stamp)
	if prev, ok := w.old[rel]; ok && trusted && prev.stamp == stamp && prev.sum == sum {
		// Listed clean with these entries and not changed since.
		w.found[rel] = prev
		for _, k := range kids {
			if k.kind == kindDir && !w.walk(prefix+k.name, k.lo, k.hi) {
				return false
			}
		}
		return true
	}
	w.memo.reads.Add(1)
	list, err := os.ReadDir(path)
	if err != nil {
		return false
	}
	byName := make(map[string]child, len(kids))
	for _, k := range kids {
		if _, dup := byName[k.name]; dup {
			return false // a file and a directory of the same name
		}
		byName[k.name] = k
	}
	clean, seen := true, 0
	for _, de := range list {
		name := de.Name()
		if rel == "" && name == ".git" {
			continue
		}
		seen++
		k, tracked := byName[name]
		switch {
		case !tracked:
			w.remove = append(w.remove, prefix+name)
			clean = false
		case k.kind == kindFile && de.IsDir():
			return false // a tracked file replaced by a directory
		case k.kind == kindDir && !de.IsDir():
			return false // a tracked directory replaced by a file or link
		case k.kind == kindDir:
			if !w.walk(prefix+name, k.lo, k.hi) {
				return false
			}
		}
	}
	if clean && trusted && seen == len(kids) {
		// Every entry the index holds here is here, and nothing else.
		w.found[rel] = cleanDir{stamp: stamp, sum: sum}
	}
	return true
}

// children lists the entries directly in the directory whose entries are
// entries[lo:hi], all named prefix + something: files and gitlinks by
// name, directories with the range of their entries. They are at most
// hi-lo, and are put on w.stack when it has room.
func (w *cleanWalk) children(prefix string, lo, hi int) []child {
	var kids []child
	if w.sp+hi-lo <= len(w.stack) {
		kids = w.stack[w.sp : w.sp : w.sp+hi-lo]
		defer func() { w.sp += len(kids) }()
	}
	for i := lo; i < hi; {
		rest := w.entries[i].name[len(prefix):]
		slash := strings.IndexByte(rest, '/')
		if slash < 0 {
			k := kindFile
			if w.entries[i].gitlink {
				k = kindGitlink
			}
			kids = append(kids, child{name: rest, kind: k})
			i++
			continue
		}
		sub := prefix + rest[:slash+1]
		end := i + sort.Search(hi-i, func(j int) bool { return !strings.HasPrefix(w.entries[i+j].name, sub) })
		kids = append(kids, child{name: rest[:slash], kind: kindDir, lo: i, hi: end})
		i = end
	}
	return kids
}

// gitPath reports whether every component of the slash-separated path p
// is one git itself would write into an index: not empty, not "." or "..",
// not .git (in any case). An index holding another (written by hand) is
// left to git.
func gitPath(p string) bool {
	if p != "" && p[0] != '.' && p[len(p)-1] != '/' && !strings.Contains(p, "/.") && !strings.Contains(p, "//") {
		return true // no component is empty or starts with a dot
	}
	for {
		name, rest, more := strings.Cut(p, "/")
		if name == "" || name == "." || name == ".." || strings.EqualFold(name, ".git") {
			return false
		}
		if !more {
			return true
		}
		p = rest
	}
}

// sum is a keyed hash of a directory's entries, independent of their
// order: equal for the same names and kinds, unpredictable to whoever
// writes the names.
func (w *cleanWalk) sum(kids []child) uint64 {
	var s uint64
	for _, k := range kids {
		h := maphash.String(w.memo.seed, k.name)
		s += (h ^ uint64(k.kind)*0x9e3779b97f4a7c15) * 0xbf58476d1ce4e5b9
	}
	return s
}

// settled reports whether a directory's last change (its stamp) is far
// enough before the clean started for a later change to give it another
// change time (racyStamp).
func (w *cleanWalk) settled(s dirStamp) bool {
	margin := racyStamp
	if s.nsec == 0 {
		margin = racyWholeSecond
	}
	return !time.Unix(s.sec, s.nsec).After(w.now.Add(-margin))
}

// newCleanMemo returns an empty memo with a new random hash key.
func newCleanMemo() *cleanMemo {
	return &cleanMemo{seed: maphash.MakeSeed(), dirs: map[string]map[string]cleanDir{}}
}

// take removes and returns what is remembered of the worktree dir: a clean
// that fails leaves nothing remembered.
func (m *cleanMemo) take(dir string) map[string]cleanDir {
	m.mu.Lock()
	defer m.mu.Unlock()
	old := m.dirs[dir]
	delete(m.dirs, dir)
	return old
}

// maxCleanMemo is how many worktrees a Client remembers at most: a pool
// has a slot per agent running at once; worktrees made per item and
// deleted other than through WorktreeRemove must not add up.
const maxCleanMemo = 256

// put remembers the directories of dir found clean.
func (m *cleanMemo) put(dir string, found map[string]cleanDir) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(found) == 0 {
		return
	}
	for other := range m.dirs {
		if len(m.dirs) < maxCleanMemo {
			break
		}
		delete(m.dirs, other)
	}
	m.dirs[dir] = found
}

// forgetClean drops what is remembered of the worktree dir (removed).
func (c *Client) forgetClean(dir string) {
	if abs, err := filepath.Abs(dir); err == nil {
		c.cleaned.take(abs)
	}
}

// indexEntries reads the paths of a git index file (versions 2 to 4), in
// the index's order (sorted), and whether each is a gitlink (a submodule).
// ok is false for anything this small reader does not vouch for: another
// version, a conflicted or skip-worktree entry, a directory entry (sparse
// index), a mandatory extension (split index, sparse index), paths out of
// order, a malformed file. (go-git's decoder takes 25 ms for 10,000
// entries; this, a fraction of one: the names of versions 2 and 3 are
// substrings of one copy of the file.)
func indexEntries(data []byte) ([]indexEntry, bool) {
	if len(data) < 12+20 || !bytes.Equal(data[:4], []byte("DIRC")) {
		return nil, false
	}
	version := binary.BigEndian.Uint32(data[4:8])
	count := int(binary.BigEndian.Uint32(data[8:12]))
	if version < 2 || version > 4 || count > len(data)/40 {
		return nil, false
	}
	text := string(data)
	end := len(data) - 20 // the trailing checksum
	entries := make([]indexEntry, 0, count)
	prev := ""
	off := 12
	for i := range count {
		const fixed = 62 // stat data 40, id 20, flags 2
		if off+fixed > end {
			return nil, false
		}
		mode := binary.BigEndian.Uint32(data[off+24 : off+28])
		flags := binary.BigEndian.Uint16(data[off+60 : off+62])
		start := off
		off += fixed
		if flags&0x4000 != 0 { // extended flags (v3+)
			if version < 3 || off+2 > end {
				return nil, false
			}
			if binary.BigEndian.Uint16(data[off:off+2])&0x4000 != 0 { // skip-worktree
				return nil, false
			}
			off += 2
		}
		if flags&0x3000 != 0 { // a merge stage: a conflict
			return nil, false
		}
		var name string
		if version == 4 {
			strip, n := binary.Uvarint(data[off:end])
			if n <= 0 || strip > uint64(len(prev)) {
				return nil, false
			}
			off += n
			nul := bytes.IndexByte(data[off:end], 0)
			if nul < 0 {
				return nil, false
			}
			name = prev[:len(prev)-int(strip)] + text[off:off+nul]
			off += nul + 1
		} else {
			nul := bytes.IndexByte(data[off:end], 0)
			if nul < 0 {
				return nil, false
			}
			name = text[off : off+nul]
			off = start + (off-start+nul+8)/8*8 // NUL-padded to a multiple of 8
		}
		if !gitPath(name) || (i > 0 && name <= prev) {
			return nil, false
		}
		switch mode >> 12 {
		case 0o10, 0o12: // regular file, symbolic link
			entries = append(entries, indexEntry{name: name})
		case 0o16: // gitlink
			entries = append(entries, indexEntry{name: name, gitlink: true})
		default: // a directory (sparse index) or unknown
			return nil, false
		}
		prev = name
	}
	for off+8 <= end { // extensions: a lower-case signature is mandatory
		if c := data[off]; c >= 'a' && c <= 'z' {
			return nil, false
		}
		off += 8 + int(binary.BigEndian.Uint32(data[off+4:off+8]))
	}
	return entries, off == end
}
