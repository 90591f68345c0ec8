package jobstore

// Where every item's row is, in memory that does not grow with the job:
// pages of locations, the ones not in use in a file.

import (
	"encoding/binary"
	"fmt"
	"os"

	"github.com/prodigy-action/prodigy-action/internal/fsx"
)

// locBytes is a location's size in the file: off, n, src.
const locBytes = 16

// The pages of a locTable (tests lower them, so that small jobs write
// pages out).
var (
	// locPageLen is how many locations one page holds (16 KiB).
	locPageLen = 1024
	// maxLocPages is how many pages a table keeps in memory (2 MiB).
	maxLocPages = 128
)

// locTable keeps the location of every item's newest durable row (rowLoc)
// by position, in pages of locPageLen: at most maxLocPages of them in
// memory, the least recently used of the others written to an unlinked
// temporary file in dir, so its memory is about 2 MiB plus 40 bytes per
// page whatever the job's size. A page that cannot be written out stays
// in memory (the table then grows, and loses nothing); one that cannot
// be read back is an error of the rows it locates. The zero value with
// dir set is an empty table; not safe for concurrent use.
type locTable struct {
	dir      string
	n        int
	pages    []locPage
	resident int
	tick     uint64
	file     *os.File // holds pages out of memory; made on first use
	noFile   bool     // the file could not be made or written: pages stay in memory
	buf      []byte
}

// locPage is one page: in memory (mem), in the file (out), or neither
// (every location rowNone).
type locPage struct {
	mem   []rowLoc // locPageLen long
	out   bool     // the file holds a copy of the page at its offset
	dirty bool     // mem differs from the file's copy
	used  uint64   // tick of the last use
}

func newLocTable(dir string) *locTable { return &locTable{dir: dir} }

// len is the number of positions.
func (t *locTable) len() int { return t.n }

// get is the location at i (0 ≤ i < len).
func (t *locTable) get(i int) (rowLoc, error) {
	p, err := t.page(i/locPageLen, false)
	if err != nil || p == nil {
		return rowLoc{}, err
	}
	return p.mem[i%locPageLen], nil
}

// set makes l the location at i (0 ≤ i < len).
func (t *locTable) set(i int, l rowLoc) error {
	p, err := t.page(i/locPageLen, l != rowLoc{})
	if err != nil || p == nil {
		return err
	}
	p.mem[i%locPageLen] = l
	p.dirty = true
	return nil
}

// push appends l at position len.
func (t *locTable) push(l rowLoc) error {
	t.resize(t.n + 1)
	return t.set(t.n-1, l)
}

// resize makes the table n positions long: positions added are rowNone.
func (t *locTable) resize(n int) {
	if n < t.n {
		// The positions dropped read rowNone if the table grows again.
		for k := (n + locPageLen - 1) / locPageLen; k < len(t.pages); k++ {
			t.drop(k)
		}
		if k := n / locPageLen; n%locPageLen != 0 && k < len(t.pages) {
			for i := n; i < min(t.n, (k+1)*locPageLen); i++ {
				if t.set(i, rowLoc{}) != nil {
					t.drop(k) // unreadable: its positions below n are lost with it
					break
				}
			}
		}
	}
	pages := (n + locPageLen - 1) / locPageLen
	for len(t.pages) < pages {
		t.pages = append(t.pages, locPage{})
	}
	t.pages = t.pages[:pages]
	t.n = n
}

// drop forgets page k.
func (t *locTable) drop(k int) {
	if t.pages[k].mem != nil {
		t.resident--
	}
	t.pages[k] = locPage{}
}

// page returns page k in memory; nil when it holds only rowNone and
// create is false.
func (t *locTable) page(k int, create bool) (*locPage, error) {
	t.tick++
	p := &t.pages[k]
	if p.mem != nil {
		p.used = t.tick
		return p, nil
	}
	if !p.out && !create {
		return nil, nil
	}
	t.evict(k)
	mem := make([]rowLoc, locPageLen)
	if p.out {
		if err := t.read(k, mem); err != nil {
			return nil, fmt.Errorf("read row locations: %w", err)
		}
	}
	p.mem, p.dirty, p.used = mem, !p.out, t.tick
	t.resident++
	return p, nil
}

// evict writes out the least recently used page in memory (not keep)
// when the table holds maxLocPages.
func (t *locTable) evict(keep int) {
	if t.resident < maxLocPages || t.noFile {
		return
	}
	victim := -1
	for k := range t.pages {
		if p := &t.pages[k]; p.mem != nil && k != keep && (victim < 0 || p.used < t.pages[victim].used) {
			victim = k
		}
	}
	if victim < 0 {
		return
	}
	p := &t.pages[victim]
	if p.dirty || !p.out {
		if err := t.write(victim, p.mem); err != nil {
			t.noFile = true
			return
		}
	}
	p.mem, p.out, p.dirty = nil, true, false
	t.resident--
}

// write puts page k into the file.
func (t *locTable) write(k int, mem []rowLoc) error {
	if t.file == nil {
		f, err := os.CreateTemp(t.dir, fsx.TempPrefix+"locs-*")
		if err != nil {
			return err
		}
		_ = os.Remove(f.Name()) // read and written through f only
		t.file = f
	}
	b := t.buffer()
	for j, l := range mem {
		e := b[j*locBytes:]
		binary.LittleEndian.PutUint64(e, uint64(l.off))
		binary.LittleEndian.PutUint32(e[8:], l.n)
		e[12], e[13], e[14], e[15] = l.src, 0, 0, 0
	}
	_, err := t.file.WriteAt(b, int64(k)*int64(locPageLen*locBytes))
	return err
}

// read fills mem with page k from the file.
func (t *locTable) read(k int, mem []rowLoc) error {
	b := t.buffer()
	if _, err := t.file.ReadAt(b, int64(k)*int64(locPageLen*locBytes)); err != nil {
		return err
	}
	for j := range mem {
		e := b[j*locBytes:]
		mem[j] = rowLoc{off: int64(binary.LittleEndian.Uint64(e)), n: binary.LittleEndian.Uint32(e[8:]), src: e[12]}
	}
	return nil
}

func (t *locTable) buffer() []byte {
	if t.buf == nil {
		t.buf = make([]byte, locPageLen*locBytes)
	}
	return t.buf
}

// anyFrom reports whether a position at or after from is located in src.
func (t *locTable) anyFrom(from int, src uint8) (bool, error) {
	for i := from; i < t.n; i++ {
		l, err := t.get(i)
		if err != nil {
			return false, err
		}
		if l.src == src {
			return true, nil
		}
	}
	return false, nil
}

// close releases the file; the table must not be used afterwards.
func (t *locTable) close() {
	if t.file != nil {
		_ = t.file.Close()
		t.file = nil
	}
	t.pages, t.n, t.resident = nil, 0, 0
}
