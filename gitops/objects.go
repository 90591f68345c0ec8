package gitops

import (
	"bytes"
	"compress/zlib"
	"io"
	"os"
	"path/filepath"
)

// looseCommitTree returns the tree id of a commit stored as a loose object in
// commonDir/objects, without running git. ok is false if the object is not
// loose (packed, in an alternate) or not a commit; callers then ask git.
func looseCommitTree(commonDir, oid string) (tree string, ok bool) {
	if !isHexOID(oid) {
		return "", false
	}
	f, err := os.Open(filepath.Join(commonDir, "objects", oid[:2], oid[2:]))
	if err != nil {
		return "", false
	}
	defer f.Close()
	zr, err := zlib.NewReader(f)
	if err != nil {
		return "", false
	}
	defer zr.Close()
	// "commit <size>\x00tree <oid>\n" fits easily in 128 bytes.
	buf := make([]byte, 128)
	n, err := io.ReadFull(zr, buf)
	if err != nil && err != io.ErrUnexpectedEOF {
		return "", false
	}
	buf = buf[:n]
	if !bytes.HasPrefix(buf, []byte("commit ")) {
		return "", false
	}
	_, body, found := bytes.Cut(buf, []byte{0})
	if !found {
		return "", false
	}
	rest, found := bytes.CutPrefix(body, []byte("tree "))
	if !found {
		return "", false
	}
	id, _, found := bytes.Cut(rest, []byte{'\n'})
	if !found || !isHexOID(string(id)) {
		return "", false
	}
	return string(id), true
}

// looseCommitParents returns the parents of a commit stored as a loose
// object, without running git; ok is false if it is not loose or not a
// commit.
func looseCommitParents(commonDir, oid string) (parents []string, ok bool) {
	if !isHexOID(oid) {
		return nil, false
	}
	f, err := os.Open(filepath.Join(commonDir, "objects", oid[:2], oid[2:]))
	if err != nil {
		return nil, false
	}
	defer f.Close()
	zr, err := zlib.NewReader(f)
	if err != nil {
		return nil, false
	}
	defer zr.Close()
	// The header (tree and parent lines) precedes the author line; 64 KiB
	// covers octopus merges with room to spare.
	data, err := io.ReadAll(io.LimitReader(zr, 64<<10))
	if err != nil || !bytes.HasPrefix(data, []byte("commit ")) {
		return nil, false
	}
	_, body, found := bytes.Cut(data, []byte{0})
	if !found {
		return nil, false
	}
	for _, line := range bytes.Split(body, []byte{'\n'}) {
		switch {
		case bytes.HasPrefix(line, []byte("tree ")):
		case bytes.HasPrefix(line, []byte("parent ")):
			p := string(line[len("parent "):])
			if !isHexOID(p) {
				return nil, false
			}
			parents = append(parents, p)
		default:
			return parents, true
		}
	}
	return nil, false
}

// maxLooseWalk bounds the in-process history walk.
const maxLooseWalk = 1000

// looseCommitsSince lists the commits reachable from head but not from base
// by walking loose commit objects in-process — the common case of an
// agent's fresh commits on top of base. ok is false (callers ask git) when
// an object is not loose, a root commit is reached (so head's history is not
// bounded by base), or the walk grows past maxLooseWalk.
func looseCommitsSince(commonDir, head, base string) (commits []string, ok bool) {
	if head == base {
		return nil, true
	}
	seen := map[string]bool{base: true}
	queue := []string{head}
	for len(queue) > 0 {
		oid := queue[0]
		queue = queue[1:]
		if seen[oid] {
			continue
		}
		seen[oid] = true
		parents, ok := looseCommitParents(commonDir, oid)
		if !ok || len(parents) == 0 || len(commits) >= maxLooseWalk {
			return nil, false
		}
		commits = append(commits, oid)
		queue = append(queue, parents...)
	}
	return commits, true
}
