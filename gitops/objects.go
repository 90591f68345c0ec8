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
