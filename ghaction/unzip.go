package ghaction

import (
	"archive/zip"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// ExtractLimits bound what ExtractZip accepts.
type ExtractLimits struct {
	// MaxFiles is the maximum number of entries; 0 means 100 000.
	MaxFiles int
	// MaxFileBytes is the maximum uncompressed size of one file; 0 means 64 MiB.
	MaxFileBytes int64
	// MaxTotalBytes is the maximum uncompressed total; 0 means 1 GiB.
	MaxTotalBytes int64
}

func (l ExtractLimits) withDefaults() ExtractLimits {
	if l.MaxFiles <= 0 {
		l.MaxFiles = 100_000
	}
	if l.MaxFileBytes <= 0 {
		l.MaxFileBytes = 64 << 20
	}
	if l.MaxTotalBytes <= 0 {
		l.MaxTotalBytes = 1 << 30
	}
	return l
}

// ErrUnsafeZip means an archive entry would escape the destination, is a
// link or special file, or exceeds the limits.
var ErrUnsafeZip = errors.New("unsafe zip archive")

// ExtractZip unpacks data into dest (created if missing). Entries with
// absolute paths, ".." components, backslashes, symlinks or other
// non-regular modes are refused with ErrUnsafeZip, as is any archive over
// the limits; sizes are enforced on the bytes actually inflated, not on the
// headers. Nothing is written outside dest.
func ExtractZip(data []byte, dest string, lim ExtractLimits) error {
	lim = lim.withDefaults()
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return fmt.Errorf("open zip: %w", err)
	}
	if len(zr.File) > lim.MaxFiles {
		return fmt.Errorf("%w: %d entries (limit %d)", ErrUnsafeZip, len(zr.File), lim.MaxFiles)
	}
	root, err := filepath.Abs(dest)
	if err != nil {
		return fmt.Errorf("resolve %s: %w", dest, err)
	}
	var total int64
	for _, f := range zr.File {
		target, err := safeTarget(root, f.Name)
		if err != nil {
			return err
		}
		if f.FileInfo().IsDir() {
			if err := os.MkdirAll(target, 0o755); err != nil {
				return fmt.Errorf("create %s: %w", target, err)
			}
			continue
		}
		if !f.Mode().IsRegular() {
			return fmt.Errorf("%w: %q is not a regular file (%v)", ErrUnsafeZip, f.Name, f.Mode())
		}
		n, err := extractFile(f, target, lim.MaxFileBytes)
		if err != nil {
			return err
		}
		total += n
		if total > lim.MaxTotalBytes {
			return fmt.Errorf("%w: more than %d bytes uncompressed", ErrUnsafeZip, lim.MaxTotalBytes)
		}
	}
	return nil
}

// safeTarget maps an entry name to a path under root or refuses it.
func safeTarget(root, name string) (string, error) {
	if name == "" || strings.ContainsAny(name, "\\\x00") || strings.HasPrefix(name, "/") || filepath.VolumeName(name) != "" {
		return "", fmt.Errorf("%w: entry name %q", ErrUnsafeZip, name)
	}
	for _, part := range strings.Split(name, "/") {
		if part == ".." {
			return "", fmt.Errorf("%w: entry %q escapes the destination", ErrUnsafeZip, name)
		}
	}
	target := filepath.Join(root, filepath.FromSlash(name))
	if target != root && !strings.HasPrefix(target, root+string(filepath.Separator)) {
		return "", fmt.Errorf("%w: entry %q escapes the destination", ErrUnsafeZip, name)
	}
	return target, nil
}

func extractFile(f *zip.File, target string, limit int64) (int64, error) {
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		return 0, fmt.Errorf("create %s: %w", filepath.Dir(target), err)
	}
	rc, err := f.Open()
	if err != nil {
		return 0, fmt.Errorf("open zip entry %q: %w", f.Name, err)
	}
	defer rc.Close()
	out, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return 0, fmt.Errorf("create %s: %w", target, err)
	}
	n, err := io.Copy(out, io.LimitReader(rc, limit+1))
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return n, fmt.Errorf("extract %q: %w", f.Name, err)
	}
	if n > limit {
		return n, fmt.Errorf("%w: %q is larger than %d bytes", ErrUnsafeZip, f.Name, limit)
	}
	return n, nil
}
