package items

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestIDHashesFindsDuplicatesAcrossRuns: with runs of 64 hashes (so an
// input of thousands is mostly on file), a duplicate is found wherever its
// two halves are (the same run, two runs, a run and the hashes left in
// memory), and distinct hashes are never called duplicates; against a map.
func TestIDHashesFindsDuplicatesAcrossRuns(t *testing.T) {
	defer func(n int) { idRunLen = n }(idRunLen)
	idRunLen = 64
	rng := rand.New(rand.NewPCG(5, 6))
	for round := range 200 {
		n := rng.IntN(3000)
		space := uint64(1) << 62
		if round%2 == 0 {
			space = uint64(n)*40 + 1 // duplicates likely
		}
		var h idHashes
		seen, want := map[uint64]bool{}, false
		for range n {
			x := rng.Uint64N(space)
			want = want || seen[x]
			seen[x] = true
			h.add(x)
		}
		got, err := h.duplicate()
		h.close()
		if err != nil || got != want {
			t.Fatalf("round %d (%d hashes, %d runs): duplicate %v, %v; want %v", round, n, len(h.runs), got, err, want)
		}
		if n >= 2*64 && len(h.runs) == 0 {
			t.Fatalf("round %d: %d hashes and no run written", round, n)
		}
	}
	for _, at := range [][2]int{{3, 9}, {3, 900}, {5, 2999}, {2990, 2999}} {
		var h idHashes
		for i := range 3000 {
			x := uint64(i) * 7919
			if i == at[1] {
				x = uint64(at[0]) * 7919
			}
			h.add(x)
		}
		if got, err := h.duplicate(); !got || err != nil {
			t.Errorf("ids %d and %d equal: duplicate %v, %v", at[0], at[1], got, err)
		}
		h.close()
	}
}

// TestIDHashesWithoutATemporaryDirectory keeps every hash in memory when
// no file can be made, and still finds what a map finds.
func TestIDHashesWithoutATemporaryDirectory(t *testing.T) {
	defer func(n int) { idRunLen = n }(idRunLen)
	idRunLen = 64
	t.Setenv("TMPDIR", filepath.Join(t.TempDir(), "gone"))
	var h idHashes
	for i := range 1000 {
		h.add(uint64(i))
	}
	h.add(500)
	if got, err := h.duplicate(); !got || err != nil || h.f != nil || len(h.buf) != 1001 {
		t.Fatalf("duplicate %v, %v; file %v, %d in memory", got, err, h.f != nil, len(h.buf))
	}
}

// TestEachFindsDuplicateIDsFarApart streams an input whose two equal ids
// are thousands of items apart, with runs of 64 hashes: Each gives Load's
// error, and an input without one streams as Load reads it.
func TestEachFindsDuplicateIDsFarApart(t *testing.T) {
	defer func(n int) { idRunLen = n }(idRunLen)
	idRunLen = 64
	dir := t.TempDir()
	var b strings.Builder
	b.WriteString("[")
	for i := range 5000 {
		id := fmt.Sprintf("id-%d", i)
		if i == 4321 {
			id = "id-17"
		}
		fmt.Fprintf(&b, "%s{\"id\": %q}", map[bool]string{true: ",", false: ""}[i > 0], id)
	}
	b.WriteString("]")
	if err := os.WriteFile(filepath.Join(dir, "dup.json"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	o := Options{Input: "dup.json", IDField: "id", Dir: dir}
	_, werr := Load(context.Background(), o)
	_, gerr := Each(context.Background(), o, func(Item) error { return nil })
	if werr == nil || gerr == nil || werr.Error() != gerr.Error() {
		t.Fatalf("Each error %v, Load error %v", gerr, werr)
	}
	ok := strings.Replace(b.String(), `"id-17"}`, `"id-5000"}`, 2)
	ok = strings.Replace(ok, `{"id": "id-5000"}`, `{"id": "id-17"}`, 1)
	if err := os.WriteFile(filepath.Join(dir, "ok.json"), []byte(ok), 0o644); err != nil {
		t.Fatal(err)
	}
	o.Input = "ok.json"
	n, err := Each(context.Background(), o, func(Item) error { return nil })
	if err != nil || n != 5000 {
		t.Fatalf("distinct ids: %d items, %v", n, err)
	}
}

// TestIDHashesOnceWritesFail: runs went out, then the file stops taking
// writes (opened read-only, as a full disk refuses them): the hashes from
// there on stay in memory and a duplicate between a run on file and
// them is still found.
func TestIDHashesOnceWritesFail(t *testing.T) {
	defer func(n int) { idRunLen = n }(idRunLen)
	idRunLen = 64
	for _, dup := range []bool{false, true} {
		var h idHashes
		for i := range 500 {
			h.add(uint64(i) * 7919)
		}
		ro, err := os.Open(fmt.Sprintf("/proc/self/fd/%d", h.f.Fd()))
		if err != nil {
			t.Skipf("no /proc: %v", err)
		}
		_ = h.f.Close()
		h.f, h.w = ro, bufio.NewWriterSize(ro, 64<<10)
		for i := 500; i < 1000; i++ {
			x := uint64(i) * 7919
			if dup && i == 900 {
				x = 17 * 7919
			}
			h.add(x)
		}
		got, err := h.duplicate()
		if err != nil || got != dup || !h.noFile || len(h.runs) != 7 || len(h.buf) < 500 {
			t.Fatalf("dup %v: duplicate %v, %v; noFile %v, %d runs, %d in memory", dup, got, err, h.noFile, len(h.runs), len(h.buf))
		}
		h.close()
	}
}
