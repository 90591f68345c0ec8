package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// filesPerDir is how many files share a leaf directory; leaf directories are
// grouped ten to a parent (src/m000/p0/f00000.txt).
const filesPerDir = 50

// fixedDate makes the template commit, and so its hash, deterministic.
const fixedDate = "1700000000 +0000"

// words is the vocabulary of the generated file contents (code-like text
// that compresses about as well as source files do).
var words = strings.Fields(`func return if else for range var const type struct interface map chan go
defer select case switch default package import error nil true false string int byte rune len cap
append make new copy delete panic recover context ctx err value result item index count total name
path file dir repo branch commit merge worktree agent retry backoff delay attempt queue record`)

// repoStats describes the synthetic repository.
type repoStats struct {
	Files int   `json:"files"`
	Bytes int64 `json:"bytes"`
	Dirs  int   `json:"dirs"`
}

// makeTemplate creates a bare repository at dir holding one commit on main
// with files files of about sizeMB MiB in total, in nested directories, with
// content drawn from a PCG seeded by seed. It uses one git fast-import, so
// the objects are packed as in a user's clone.
func makeTemplate(ctx context.Context, dir string, files int, sizeMB float64, seed uint64) (repoStats, error) {
	if err := gitRun(ctx, "", nil, "init", "-q", "--bare", "--object-format=sha1", "-b", "main", dir); err != nil {
		return repoStats{}, err
	}
	cmd := exec.CommandContext(ctx, "git", "fast-import", "--quiet", "--done")
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return repoStats{}, fmt.Errorf("failed to open git fast-import stdin: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return repoStats{}, fmt.Errorf("failed to start git fast-import: %w", err)
	}
	w := bufio.NewWriterSize(in, 1<<20)
	stats, werr := writeImport(w, files, sizeMB, seed)
	if werr == nil {
		werr = w.Flush()
	}
	in.Close()
	if err := cmd.Wait(); err != nil {
		return stats, fmt.Errorf("git fast-import failed: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	if werr != nil {
		return stats, fmt.Errorf("failed to write the fast-import stream: %w", werr)
	}
	return stats, nil
}

// writeImport writes the fast-import stream of the template commit.
func writeImport(w *bufio.Writer, files int, sizeMB float64, seed uint64) (repoStats, error) {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	mean := int(sizeMB * (1 << 20) / float64(files))
	msg := fmt.Sprintf("synthetic repository: %d files, seed %d\n", files, seed)
	fmt.Fprintf(w, "commit refs/heads/main\nauthor Bench <bench@example.com> %s\ncommitter Bench <bench@example.com> %s\ndata %d\n%s",
		fixedDate, fixedDate, len(msg), msg)
	st := repoStats{Files: files}
	var buf []byte
	for i := range files {
		// Sizes are uniform in [mean/2, 3·mean/2], so the total is about sizeMB.
		size := mean/2 + rng.IntN(mean+1)
		buf = fileContent(buf[:0], rng, i, size)
		fmt.Fprintf(w, "M 100644 inline %s\ndata %d\n", synthPath(i), len(buf))
		w.Write(buf)
		w.WriteByte('\n')
		st.Bytes += int64(len(buf))
	}
	st.Dirs = (files + filesPerDir - 1) / filesPerDir
	_, err := w.WriteString("done\n")
	return st, err
}

// synthPath is the path of synthetic file i.
func synthPath(i int) string {
	leaf := i / filesPerDir
	return fmt.Sprintf("src/m%03d/p%d/f%05d.txt", leaf/10, leaf%10, i)
}

// fileContent appends about size bytes of word lines to buf.
func fileContent(buf []byte, rng *rand.Rand, i, size int) []byte {
	buf = fmt.Appendf(buf, "// file %d\n", i)
	for len(buf) < size {
		for n := 4 + rng.IntN(9); n > 0; n-- {
			buf = append(buf, words[rng.IntN(len(words))]...)
			buf = append(buf, ' ')
		}
		buf[len(buf)-1] = '\n'
	}
	return buf
}

// cloneRepo makes a fresh working clone of the template at dir (objects are
// hard-linked, the default branch is checked out) and configures it like a
// developer's checkout: an identity, and no automatic gc or maintenance, so
// no run pays for a background repack that another run would not.
func cloneRepo(ctx context.Context, template, dir string) error {
	if err := gitRun(ctx, "", nil, "clone", "-q", "--local", template, dir); err != nil {
		return err
	}
	for _, kv := range [][2]string{
		{"user.name", "Bench"}, {"user.email", "bench@example.com"},
		{"gc.auto", "0"}, {"maintenance.auto", "false"},
	} {
		if err := gitRun(ctx, dir, nil, "config", kv[0], kv[1]); err != nil {
			return err
		}
	}
	return nil
}

// gitRun runs git in dir with extra environment, returning an error that
// carries its stderr.
func gitRun(ctx context.Context, dir string, env []string, args ...string) error {
	_, err := gitOut(ctx, dir, env, args...)
	return err
}

// gitOut runs git in dir and returns its trimmed stdout.
func gitOut(ctx context.Context, dir string, env []string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("git %s (in %s): %w: %s", strings.Join(args, " "), filepath.Base(dir), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(stdout.String()), nil
}
