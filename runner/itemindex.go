package runner

import (
	"hash/maphash"

	"github.com/prodigy-action/prodigy-action/jobstore"
)

// itemIndex finds a checkpoint item's position by its id without holding
// the ids in memory: a 64-bit hash of each id maps to its position; the
// candidates of an id are confirmed against the items themselves, read
// back for it (jobstore.State.UpdateItemsAt), so a collision costs a
// lookup, never a wrong match.
type itemIndex struct {
	seed maphash.Seed
	at   map[uint64]int   // hash → position
	more map[uint64][]int // hash → further positions (collisions)
}

// newItemIndex indexes the state's items.
func newItemIndex(s *jobstore.State) (*itemIndex, error) {
	x := &itemIndex{seed: maphash.MakeSeed(), at: make(map[uint64]int, s.Len())}
	err := s.Scan(func(pos int, it *jobstore.CheckpointItem) bool {
		x.add(it.ItemID, pos)
		return true
	})
	return x, err
}

func (x *itemIndex) hash(id string) uint64 { return maphash.String(x.seed, id) }

// add records that id is at pos.
func (x *itemIndex) add(id string, pos int) {
	h := x.hash(id)
	if _, ok := x.at[h]; !ok {
		x.at[h] = pos
		return
	}
	if x.more == nil {
		x.more = map[uint64][]int{}
	}
	x.more[h] = append(x.more[h], pos)
}

// candidates are the positions an item with id may be at.
func (x *itemIndex) candidates(id string) []int {
	h := x.hash(id)
	pos, ok := x.at[h]
	if !ok {
		return nil
	}
	return append([]int{pos}, x.more[h]...)
}

// find returns id's position among items, whose items at its candidates
// are in memory.
func (x *itemIndex) find(items jobstore.ItemsAt, id string) (int, bool) {
	for _, pos := range x.candidates(id) {
		if it := items.At(pos); it != nil && it.ItemID == id {
			return pos, true
		}
	}
	return 0, false
}
