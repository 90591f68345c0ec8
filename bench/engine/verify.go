package main

import (
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"strings"
)

// verifySame fails unless every run produced the same merged tree.
func verifySame(ms []measurement) error {
	for _, m := range ms[1:] {
		if m.Tree != ms[0].Tree {
			return fmt.Errorf("merged trees differ: %s (N=%d, P=%d) has %s, %s (N=%d, P=%d) has %s",
				ms[0].Kind, ms[0].N, ms[0].MaxParallel, ms[0].Tree, m.Kind, m.N, m.MaxParallel, m.Tree)
		}
	}
	return nil
}

// verifyContent fails unless the results branch of repo is main's
// tree plus exactly out/item-1.txt … out/item-<n>.txt with the content the
// agent writes.
func verifyContent(ctx context.Context, repo string, n int) error {
	format, err := gitOut(ctx, repo, nil, "rev-parse", "--show-object-format")
	if err != nil {
		return err
	}
	newHash := sha1.New
	if format == "sha256" {
		newHash = sha256.New
	}
	// Everything but out/ is unchanged.
	base, err := gitOut(ctx, repo, nil, "ls-tree", "main")
	if err != nil {
		return err
	}
	got, err := gitOut(ctx, repo, nil, "ls-tree", resultsBranch)
	if err != nil {
		return err
	}
	var rest []string
	for line := range strings.Lines(got) {
		if !strings.HasSuffix(strings.TrimRight(line, "\n"), "\tout") {
			rest = append(rest, strings.TrimRight(line, "\n"))
		}
	}
	if strings.Join(rest, "\n") != base {
		return fmt.Errorf("%s changed files outside out/", resultsBranch)
	}
	// out/ holds exactly the items' files with the right blobs.
	want := make(map[string]string, n)
	for i := 1; i <= n; i++ {
		want[itemPath(i)] = blobHash(newHash, itemContent(i))
	}
	list, err := gitOut(ctx, repo, nil, "ls-tree", "-r", resultsBranch, "--", "out/")
	if err != nil {
		return err
	}
	seen := 0
	for line := range strings.Lines(list) {
		meta, path, ok := strings.Cut(strings.TrimRight(line, "\n"), "\t")
		f := strings.Fields(meta)
		if !ok || len(f) != 3 {
			return fmt.Errorf("unexpected ls-tree line %q", line)
		}
		w, found := want[path]
		switch {
		case !found:
			return fmt.Errorf("%s has an unexpected file %s", resultsBranch, path)
		case f[2] != w:
			return fmt.Errorf("%s: %s has blob %s, want %s", resultsBranch, path, f[2], w)
		}
		seen++
	}
	if seen != len(want) {
		return fmt.Errorf("%s has %d of the %d item files", resultsBranch, seen, len(want))
	}
	return nil
}

// blobHash is git's object id of a blob holding content.
func blobHash(newHash func() hash.Hash, content string) string {
	h := newHash()
	fmt.Fprintf(h, "blob %d\x00%s", len(content), content)
	return hex.EncodeToString(h.Sum(nil))
}
