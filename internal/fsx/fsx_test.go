package fsx_test

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prodigy-action/prodigy-action/internal/fsx"
)

func TestWriteFileReplacesAtomically(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f.json")
	for _, write := range []func(string, []byte, os.FileMode) error{fsx.WriteFile, fsx.WriteFileNoSync} {
		if err := write(path, []byte("one"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := write(path, []byte("two"), 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != "two" {
			t.Fatalf("content = %q, %v", got, err)
		}
		st, _ := os.Stat(path)
		if st.Mode().Perm() != 0o644 {
			t.Errorf("mode = %v, want 0644", st.Mode().Perm())
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("temporary files left: %v", entries)
	}
}

func TestWriteFileFailureLeavesNoTemporaryFile(t *testing.T) {
	dir := t.TempDir()
	// The target is a non-empty directory: the rename fails.
	target := filepath.Join(dir, "target")
	if err := os.MkdirAll(filepath.Join(target, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	err := fsx.WriteFile(target, []byte("data"), 0o644)
	if err == nil || !strings.Contains(err.Error(), "rename") {
		t.Fatalf("err = %v, want a rename error", err)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), fsx.TempPrefix) {
			t.Errorf("temporary file left: %s", e.Name())
		}
	}
	if err := fsx.WriteFile(filepath.Join(dir, "missing", "f"), nil, 0o644); err == nil {
		t.Error("WriteFile into a missing directory succeeded")
	}
}

func TestLocksExcludeEachOther(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.lock")
	l, err := fsx.LockFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fsx.TryLock(path); !errors.Is(err, fsx.ErrLocked) {
		t.Fatalf("TryLock while held = %v, want ErrLocked", err)
	}
	if _, err := l.File().WriteString("state"); err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(); err != nil {
		t.Fatal(err)
	}
	l2, err := fsx.TryLock(path)
	if err != nil {
		t.Fatalf("TryLock after Unlock = %v", err)
	}
	if err := l2.Unlock(); err != nil {
		t.Fatal(err)
	}
	if err := l2.Unlock(); err == nil {
		t.Error("a second Unlock reported no error")
	}
	if _, err := fsx.LockFile(filepath.Join(path, "sub", "x.lock")); err == nil || errors.Is(err, fsx.ErrLocked) {
		t.Errorf("LockFile on an impossible path = %v, want an open error", err)
	}
}

func TestWriteStreamReplacesOnlyOnSuccess(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "export.csv")
	if err := fsx.WriteStream(path, 0o644, func(w io.Writer) error {
		_, err := io.WriteString(w, "a,b\n")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	err := fsx.WriteStream(path, 0o644, func(w io.Writer) error {
		_, _ = io.WriteString(w, "partial")
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want boom wrapped", err)
	}
	if got, _ := os.ReadFile(path); string(got) != "a,b\n" {
		t.Errorf("a failed stream replaced the file: %q", got)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("temporary files left: %v", entries)
	}
}
