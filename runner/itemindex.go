package runner

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"io"
	"os"

	"github.com/prodigy-action/prodigy-action/internal/fsx"
	"github.com/prodigy-action/prodigy-action/jobstore"
)

// itemIndex finds checkpoint items' positions by their ids with memory
// that does not grow with the job: a 32-bit fingerprint of each item's id
// (a keyed hash), by position, in an unlinked file beside the checkpoint
// (4 bytes per item on disk). The positions of a page of ids are found in
// one pass over the file (lookup) and confirmed against the items
// themselves, read back for them (jobstore.State.UpdateItemsAt), so a
// fingerprint shared by two ids costs a read, never a wrong match. Not
// safe for concurrent use; close it when done.
type itemIndex struct {
	seed maphash.Seed
	f    *os.File
	n    int   // positions written
	err  error // an add that failed: the index misses an item from there
	// page holds the candidates of the fingerprints last looked up.
	page map[uint32][]int
}

// newItemIndex indexes the state's items in a file in dir.
func newItemIndex(s *jobstore.State, dir string) (_ *itemIndex, err error) {
	f, err := os.CreateTemp(dir, fsx.TempPrefix+"ids-*")
	if err != nil {
		return nil, fmt.Errorf("index the job's items: %w", err)
	}
	_ = os.Remove(f.Name()) // read and written through f only
	x := &itemIndex{seed: maphash.MakeSeed(), f: f}
	defer func() {
		if err != nil {
			x.close()
		}
	}()
	w := bufio.NewWriterSize(f, 64<<10)
	var b [4]byte
	var werr error
	err = s.Scan(func(_ int, it *jobstore.CheckpointItem) bool {
		binary.LittleEndian.PutUint32(b[:], x.fingerprint(it.ItemID))
		_, werr = w.Write(b[:])
		x.n++
		return werr == nil
	})
	if err == nil {
		err = werr
	}
	if err == nil {
		err = w.Flush()
	}
	if err != nil {
		return nil, fmt.Errorf("index the job's items: %w", err)
	}
	return x, nil
}

func (x *itemIndex) fingerprint(id string) uint32 {
	return uint32(maphash.String(x.seed, id))
}

// lookup finds the positions the items with ids may be at, in one pass
// over the index; find then answers for these ids.
func (x *itemIndex) lookup(ids []string) ([]int, error) {
	if x.err != nil {
		return nil, x.err
	}
	x.page = make(map[uint32][]int, len(ids))
	for _, id := range ids {
		x.page[x.fingerprint(id)] = nil
	}
	r := bufio.NewReaderSize(io.NewSectionReader(x.f, 0, int64(x.n)*4), 64<<10)
	var b [4]byte
	var all []int
	for pos := range x.n {
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return nil, fmt.Errorf("read the job's item index: %w", err)
		}
		fp := binary.LittleEndian.Uint32(b[:])
		if at, ok := x.page[fp]; ok {
			x.page[fp] = append(at, pos)
			all = append(all, pos)
		}
	}
	return all, nil
}

// add records that id is at pos, the next position. When it cannot, the
// next lookup fails (an item the index misses could be added twice).
func (x *itemIndex) add(id string, pos int) {
	if x.err != nil {
		return
	}
	if pos != x.n {
		x.err = fmt.Errorf("index the job's items: item %s added at %d, not at %d", id, pos, x.n)
		return
	}
	fp := x.fingerprint(id)
	if at, ok := x.page[fp]; ok {
		x.page[fp] = append(at, pos)
	}
	var b [4]byte
	binary.LittleEndian.PutUint32(b[:], fp)
	if _, err := x.f.WriteAt(b[:], int64(pos)*4); err != nil {
		x.err = fmt.Errorf("index the job's items: %w", err)
		return
	}
	x.n++
}

// find returns id's position among items, whose items at the candidates
// lookup gave for id (or added since) are in memory.
func (x *itemIndex) find(items jobstore.ItemsAt, id string) (int, bool) {
	for _, pos := range x.page[x.fingerprint(id)] {
		if it := items.At(pos); it != nil && it.ItemID == id {
			return pos, true
		}
	}
	return 0, false
}

// close releases the index's file.
func (x *itemIndex) close() {
	if x != nil && x.f != nil {
		_ = x.f.Close()
		x.f = nil
	}
}
