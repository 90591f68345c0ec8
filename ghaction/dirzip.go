package ghaction

import (
	"archive/zip"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// WriteDirZipFile writes into f (a new file in practice) a zip of every
// regular file under dir, named by its slash-separated path relative to
// dir, as actions/upload-artifact lays out a directory (so
// actions/download-artifact extracts the same tree). Symbolic links and
// other non-regular files are left out: nothing outside dir is read. It
// returns f as the Blob to upload (size and sha256 digest computed as it
// was written). Memory does not grow with the files' sizes: each is
// streamed through the compressor (deflate, fastest level).
func WriteDirZipFile(f *os.File, dir string) (Blob, error) {
	blob, err := writeBlob(f, func(w io.Writer) error {
		zw := zip.NewWriter(w)
		zw.RegisterCompressor(zip.Deflate, fastDeflate)
		err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.Type().IsRegular() {
				return nil
			}
			rel, err := filepath.Rel(dir, p)
			if err != nil {
				return err
			}
			return addZipFileFrom(zw, filepath.ToSlash(rel), p)
		})
		if err != nil {
			return err
		}
		return zw.Close()
	})
	if err != nil {
		return Blob{}, fmt.Errorf("zip %s: %w", dir, err)
	}
	return blob, nil
}

// addZipFileFrom adds the file at path p as name, streamed, with its
// modification time.
func addZipFileFrom(zw *zip.Writer, name, p string) error {
	src, err := os.Open(p)
	if err != nil {
		return err
	}
	defer src.Close()
	fi, err := src.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() { // replaced since the walk saw it
		return nil
	}
	h := &zip.FileHeader{Name: name, Method: zip.Deflate, Modified: fi.ModTime().UTC()}
	w, err := zw.CreateHeader(h)
	if err != nil {
		return fmt.Errorf("add %s to zip: %w", name, err)
	}
	if _, err := io.Copy(w, src); err != nil {
		return fmt.Errorf("write %s to zip: %w", name, err)
	}
	return nil
}
