package gitops

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// maxRefFile bounds what readAgentHead reads of one ref file, and
// maxPackedRefs the packed-refs file.
const (
	maxRefFile    = 4 << 10
	maxPackedRefs = 64 << 20
)

// readAgentHead resolves HEAD in an agent's git directory in-process: the
// directory itself must be a directory (not a symbolic link), ref files
// regular files of at most maxRefFile bytes, symbolic refs under refs/ and
// at most 5 deep, packed refs read line by line. It returns the commit id
// HEAD names (not checked to exist).
func readAgentHead(gitDir string) (string, error) {
	fi, err := os.Lstat(gitDir)
	if err != nil || !fi.IsDir() {
		return "", fmt.Errorf("the agent's repository at %s is gone or was replaced", gitDir)
	}
	name := "HEAD"
	for range 5 {
		b, err := readSmallFile(filepath.Join(gitDir, filepath.FromSlash(name)), maxRefFile)
		if errors.Is(err, os.ErrNotExist) && name != "HEAD" {
			return packedRef(gitDir, name)
		}
		if err != nil {
			return "", fmt.Errorf("read %s of the agent's repository: %w", name, err)
		}
		s := strings.TrimSpace(string(b))
		if target, ok := strings.CutPrefix(s, "ref: "); ok {
			if !strings.HasPrefix(target, "refs/") || !validRefName(target) {
				return "", fmt.Errorf("the agent's %s names an invalid ref", name)
			}
			name = target
			continue
		}
		if !isHexOID(s) {
			return "", fmt.Errorf("the agent's %s is not a commit id", name)
		}
		return s, nil
	}
	return "", errors.New("the agent's HEAD is a chain of symbolic refs more than 5 deep")
}

// readSmallFile reads a regular file (not a symbolic link) of at most max
// bytes.
func readSmallFile(path string, max int64) ([]byte, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() || fi.Size() > max {
		return nil, fmt.Errorf("%s is not a small regular file", filepath.Base(path))
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, max))
}

// packedRef finds ref in the agent's packed-refs file.
func packedRef(gitDir, ref string) (string, error) {
	path := filepath.Join(gitDir, "packed-refs")
	fi, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("the agent's %s does not exist", ref)
	}
	if err != nil || !fi.Mode().IsRegular() || fi.Size() > maxPackedRefs {
		return "", errors.New("the agent's packed-refs is not a regular file of a sane size")
	}
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(io.LimitReader(f, maxPackedRefs))
	sc.Buffer(make([]byte, 0, 4096), 64<<10)
	for sc.Scan() {
		oid, name, ok := strings.Cut(sc.Text(), " ")
		if ok && name == ref && isHexOID(oid) {
			return oid, nil
		}
	}
	if err := sc.Err(); err != nil {
		return "", fmt.Errorf("read the agent's packed-refs: %w", err)
	}
	return "", fmt.Errorf("the agent's %s does not exist", ref)
}
