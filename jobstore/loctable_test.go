package jobstore

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// TestLocTableMatchesASlice sets, reads, appends and cuts row locations
// at random, with pages of 8 and 3 in memory (TestMain), against a plain
// slice: every read gives what the slice holds, no more than 3 pages are
// ever in memory, and pages did go out to the file and come back.
func TestLocTableMatchesASlice(t *testing.T) {
	tab := newLocTable(t.TempDir())
	defer tab.close()
	var want []rowLoc
	rng := rand.New(rand.NewPCG(1, 2))
	loc := func() rowLoc {
		return rowLoc{off: rng.Int64N(1 << 40), n: rng.Uint32(), src: uint8(rng.IntN(4))}
	}
	for op := range 20000 {
		switch r := rng.IntN(100); {
		case r < 30:
			l := loc()
			if err := tab.push(l); err != nil {
				t.Fatal(err)
			}
			want = append(want, l)
		case r < 60 && len(want) > 0:
			i, l := rng.IntN(len(want)), loc()
			if err := tab.set(i, l); err != nil {
				t.Fatal(err)
			}
			want[i] = l
		case r < 99 && len(want) > 0:
			i := rng.IntN(len(want))
			got, err := tab.get(i)
			if err != nil || got != want[i] {
				t.Fatalf("op %d: get(%d) = %+v, %v; want %+v", op, i, got, err, want[i])
			}
		case len(want) > 0:
			n := len(want) - rng.IntN(min(len(want), 3*locPageLen))
			tab.resize(n)
			want = want[:n]
			grow := rng.IntN(20)
			tab.resize(n + grow)
			want = append(want, make([]rowLoc, grow)...)
		}
		if tab.resident > maxLocPages {
			t.Fatalf("op %d: %d pages in memory, at most %d", op, tab.resident, maxLocPages)
		}
		if tab.len() != len(want) {
			t.Fatalf("op %d: len %d, want %d", op, tab.len(), len(want))
		}
	}
	if tab.file == nil || len(want) < 10*locPageLen {
		t.Fatalf("no page went out (%d locations)", len(want))
	}
	for i := range want {
		if got, err := tab.get(i); err != nil || got != want[i] {
			t.Fatalf("get(%d) = %+v, %v; want %+v", i, got, err, want[i])
		}
	}
}

// TestLocTableKeepsPagesItCannotWriteOut: without a directory for its
// file the table keeps every page in memory and loses nothing; a page it
// cannot read back is an error, not a location of rowNone.
func TestLocTableKeepsPagesItCannotWriteOut(t *testing.T) {
	tab := newLocTable(filepath.Join(t.TempDir(), "gone"))
	for i := range 10 * locPageLen {
		if err := tab.push(rowLoc{off: int64(i), n: 1, src: rowSnapshot}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 10 * locPageLen {
		if l, err := tab.get(i); err != nil || l.off != int64(i) {
			t.Fatalf("get(%d) = %+v, %v", i, l, err)
		}
	}
	if tab.resident != 10 {
		t.Fatalf("%d pages in memory, want all 10", tab.resident)
	}

	tab = newLocTable(t.TempDir())
	for i := range 10 * locPageLen {
		if err := tab.push(rowLoc{off: int64(i), n: 1, src: rowSnapshot}); err != nil {
			t.Fatal(err)
		}
	}
	_ = tab.file.Close()
	if _, err := tab.get(0); err == nil {
		t.Fatal("a page that cannot be read back gave no error")
	}
}

// TestLocTableKeepsPagesOnceWritesFail: pages went out, then the file
// stops taking writes (here: opened read-only, as a full disk refuses
// them): the pages out are still read back, every later page stays in
// memory, and nothing is lost.
func TestLocTableKeepsPagesOnceWritesFail(t *testing.T) {
	tab := newLocTable(t.TempDir())
	defer tab.close()
	for i := range 10 * locPageLen {
		if err := tab.push(rowLoc{off: int64(i), n: 1, src: rowJournal}); err != nil {
			t.Fatal(err)
		}
	}
	ro, err := os.Open(fmt.Sprintf("/proc/self/fd/%d", tab.file.Fd()))
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	_ = tab.file.Close()
	tab.file = ro
	for i := range 10 * locPageLen {
		if err := tab.push(rowLoc{off: int64(10*locPageLen + i), n: 2, src: rowSnapshot}); err != nil {
			t.Fatal(err)
		}
	}
	if !tab.noFile || tab.resident <= maxLocPages {
		t.Fatalf("writes failed but noFile %v, %d pages in memory", tab.noFile, tab.resident)
	}
	for i := range 20 * locPageLen {
		l, err := tab.get(i)
		if err != nil || l.off != int64(i) {
			t.Fatalf("get(%d) = %+v, %v", i, l, err)
		}
	}
}

// TestItemTableHoldsOnlyWhatIsInMemory sets and drops items at random
// against a plain slice: every position reads what the slice holds, each
// visits exactly the items in memory in order, and a chunk exists only
// while one of its items is in memory.
func TestItemTableHoldsOnlyWhatIsInMemory(t *testing.T) {
	var tab itemTable
	var want []*CheckpointItem
	rng := rand.New(rand.NewPCG(3, 4))
	for op := range 50000 {
		switch r := rng.IntN(100); {
		case r < 20:
			it := &CheckpointItem{Index: op}
			if rng.IntN(2) == 0 {
				it = nil
			}
			tab.push(it)
			want = append(want, it)
		case r < 70 && len(want) > 0:
			i := rng.IntN(len(want))
			var it *CheckpointItem
			if rng.IntN(3) == 0 {
				it = &CheckpointItem{Index: op}
			}
			tab.set(i, it)
			want[i] = it
		case r < 99 && len(want) > 0:
			i := rng.IntN(len(want))
			if tab.get(i) != want[i] {
				t.Fatalf("op %d: get(%d) differs", op, i)
			}
		case len(want) > 0:
			n := rng.IntN(len(want))
			tab.resize(n)
			want = want[:n]
		}
	}
	live, k := 0, 0
	tab.each(func(i int, it *CheckpointItem) {
		for k < len(want) && want[k] == nil {
			k++
		}
		if i != k || it != want[k] {
			t.Fatalf("each gave position %d, want %d", i, k)
		}
		k++
		live++
	})
	if live != tab.live {
		t.Fatalf("each gave %d items, live %d", live, tab.live)
	}
	for c, ch := range tab.chunks {
		has := false
		for i := c * itemChunkLen; i < min(len(want), (c+1)*itemChunkLen); i++ {
			has = has || want[i] != nil
		}
		if has != (ch != nil) {
			t.Fatalf("chunk %d exists %v, holds items %v", c, ch != nil, has)
		}
	}
}
