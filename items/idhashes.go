package items

import (
	"bufio"
	"container/heap"
	"encoding/binary"
	"io"
	"os"
	"slices"
)

// idRunLen is how many id hashes idHashes keeps in memory (4 MiB) before
// it writes them out as a sorted run (tests lower it).
var idRunLen = 1 << 19

// idHashes finds a duplicate among the 64-bit hashes of a streamed
// input's ids with memory that does not grow with the input: up to
// idRunLen hashes are kept in memory; beyond, each idRunLen are sorted
// and written as a run to an unlinked temporary file (8 bytes per id on
// disk), and the runs are merged at the end. When the file cannot be
// made or written the hashes stay in memory (nothing is lost). Close it
// when done.
type idHashes struct {
	buf    []uint64
	f      *os.File
	w      *bufio.Writer
	runs   []int64 // start of each run in the file, in hashes
	n      int64   // hashes in the file
	noFile bool
	dup    bool // a duplicate was seen in a run already
}

// add records one hash.
func (h *idHashes) add(x uint64) {
	h.buf = append(h.buf, x)
	if len(h.buf) >= idRunLen && !h.noFile {
		h.spill()
	}
}

// spill writes the hashes in memory out as one sorted run.
func (h *idHashes) spill() {
	slices.Sort(h.buf)
	if hasAdjacent(h.buf) {
		h.dup = true
	}
	if h.f == nil {
		f, err := os.CreateTemp("", "prodigy-ids-*")
		if err != nil {
			h.noFile = true
			return
		}
		_ = os.Remove(f.Name()) // read and written through f only
		h.f, h.w = f, bufio.NewWriterSize(f, 64<<10)
	}
	var b [8]byte
	var err error
	for _, x := range h.buf {
		binary.LittleEndian.PutUint64(b[:], x)
		if _, err = h.w.Write(b[:]); err != nil {
			break
		}
	}
	if err == nil {
		err = h.w.Flush()
	}
	if err != nil {
		// The runs written stay; this one and the hashes to come are
		// kept in memory.
		h.noFile = true
		return
	}
	h.runs = append(h.runs, h.n)
	h.n += int64(len(h.buf))
	h.buf = h.buf[:0]
}

// duplicate reports whether two hashes are equal.
func (h *idHashes) duplicate() (bool, error) {
	if h.dup {
		return true, nil
	}
	if len(h.runs) == 0 {
		slices.Sort(h.buf)
		return hasAdjacent(h.buf), nil
	}
	if len(h.buf) > 0 && !h.noFile {
		h.spill()
		if h.dup {
			return true, nil
		}
	}
	// What spill could not write out is still in memory.
	slices.Sort(h.buf)
	if hasAdjacent(h.buf) {
		return true, nil
	}
	return h.merge(h.buf)
}

// merge reads the runs in the file and mem (sorted) in order and reports
// whether two neighbours are equal.
func (h *idHashes) merge(mem []uint64) (bool, error) {
	var q runHeap
	for k, start := range h.runs {
		end := h.n
		if k+1 < len(h.runs) {
			end = h.runs[k+1]
		}
		r := &run{r: bufio.NewReaderSize(io.NewSectionReader(h.f, start*8, (end-start)*8), 64<<10), left: end - start}
		if ok, err := r.next(); err != nil {
			return false, err
		} else if ok {
			q = append(q, r)
		}
	}
	if len(mem) > 0 {
		q = append(q, &run{mem: mem, left: int64(len(mem))})
		_, _ = q[len(q)-1].next()
	}
	heap.Init(&q)
	var prev uint64
	first := true
	for len(q) > 0 {
		r := q[0]
		if !first && r.cur == prev {
			return true, nil
		}
		prev, first = r.cur, false
		ok, err := r.next()
		if err != nil {
			return false, err
		}
		if ok {
			heap.Fix(&q, 0)
		} else {
			heap.Pop(&q)
		}
	}
	return false, nil
}

// close releases the file.
func (h *idHashes) close() {
	if h.f != nil {
		_ = h.f.Close()
		h.f = nil
	}
}

func hasAdjacent(s []uint64) bool {
	for i := 1; i < len(s); i++ {
		if s[i] == s[i-1] {
			return true
		}
	}
	return false
}

// run is one sorted run being merged: from the file (r) or memory.
type run struct {
	r    *bufio.Reader
	mem  []uint64
	left int64
	cur  uint64
}

// next moves to the run's next hash; false at its end.
func (r *run) next() (bool, error) {
	if r.left == 0 {
		return false, nil
	}
	r.left--
	if r.r == nil {
		r.cur, r.mem = r.mem[0], r.mem[1:]
		return true, nil
	}
	var b [8]byte
	if _, err := io.ReadFull(r.r, b[:]); err != nil {
		return false, err
	}
	r.cur = binary.LittleEndian.Uint64(b[:])
	return true, nil
}

// runHeap orders runs by their current hash.
type runHeap []*run

func (q runHeap) Len() int           { return len(q) }
func (q runHeap) Less(i, j int) bool { return q[i].cur < q[j].cur }
func (q runHeap) Swap(i, j int)      { q[i], q[j] = q[j], q[i] }
func (q *runHeap) Push(x any)        { *q = append(*q, x.(*run)) }
func (q *runHeap) Pop() any {
	old := *q
	r := old[len(old)-1]
	*q = old[:len(old)-1]
	return r
}
