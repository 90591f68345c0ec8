package gitops

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
)

// nothingToClean reports whether `git clean -ffdx` would have nothing to
// delete in the worktree dir: every file, symbolic link and directory under
// it (but the top-level .git) is in its index, or is a directory that
// holds index entries. It reads the index and the directories in-process,
// which costs a fraction of a git process (issue 14: clean in proportion to
// what an attempt left, not to the repository). false means "run git": an
// untracked or ignored path was found, or something is not understood — an
// index git may have changed in a way go-git does not read (a sparse index,
// skip-worktree entries, a future version), a tracked file that became a
// directory, an unreadable directory.
func nothingToClean(dir string) bool {
	gitDir, ok := worktreeGitDir(dir)
	if !ok {
		return false
	}
	data, err := os.ReadFile(filepath.Join(gitDir, "index"))
	if err != nil {
		return false
	}
	files, ok := indexPaths(data)
	if !ok {
		return false
	}
	dirs := map[string]bool{"": true}
	for name := range files {
		// Every parent directory, innermost first, as substrings of name
		// (no allocation); a known one has its parents recorded already.
		for i := len(name) - 1; i > 0; i-- {
			if name[i] == '/' {
				if dirs[name[:i]] {
					break
				}
				dirs[name[:i]] = true
			}
		}
	}
	var walk func(rel string) bool
	walk = func(rel string) bool {
		entries, err := os.ReadDir(filepath.Join(dir, filepath.FromSlash(rel)))
		if err != nil {
			return false
		}
		for _, de := range entries {
			name := de.Name()
			if rel == "" && name == ".git" {
				continue
			}
			p := name
			if rel != "" {
				p = rel + "/" + name
			}
			if gitlink, tracked := files[p]; tracked {
				if de.IsDir() && !gitlink {
					return false // a tracked file replaced by a directory
				}
				continue
			}
			if !de.IsDir() || !dirs[p] || !walk(p) {
				return false // untracked, ignored, or not understood
			}
		}
		return true
	}
	return walk("")
}

// indexPaths reads the paths of a git index file (versions 2 to 4) and
// whether each is a gitlink (a submodule). ok is false for anything this
// small reader does not vouch for: another version, a conflicted or
// skip-worktree entry, a directory entry (sparse index), a mandatory
// extension (split index, sparse index), a malformed file. (go-git's
// decoder takes 25 ms for 10,000 entries; this, about one.)
func indexPaths(data []byte) (map[string]bool, bool) {
	if len(data) < 12+20 || !bytes.Equal(data[:4], []byte("DIRC")) {
		return nil, false
	}
	version := binary.BigEndian.Uint32(data[4:8])
	count := int(binary.BigEndian.Uint32(data[8:12]))
	if version < 2 || version > 4 || count > len(data)/40 {
		return nil, false
	}
	end := len(data) - 20 // the trailing checksum
	files := make(map[string]bool, count)
	var prev []byte
	off := 12
	for range count {
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
		var name []byte
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
			name = append(append([]byte(nil), prev[:len(prev)-int(strip)]...), data[off:off+nul]...)
			off += nul + 1
		} else {
			nul := bytes.IndexByte(data[off:end], 0)
			if nul < 0 {
				return nil, false
			}
			name = data[off : off+nul]
			off = start + (off-start+nul+8)/8*8 // NUL-padded to a multiple of 8
		}
		switch mode >> 12 {
		case 0o10, 0o12: // regular file, symbolic link
			files[string(name)] = false
		case 0o16: // gitlink
			files[string(name)] = true
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
	return files, off == end
}
