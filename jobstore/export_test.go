package jobstore

import (
	"os"
	"testing"
)

// TestMain runs the package's tests with pages of eight row locations
// and three pages in memory, so that every test of a State with more than
// 24 items writes pages out to the file and reads them back.
func TestMain(m *testing.M) {
	locPageLen, maxLocPages = 8, 3
	os.Exit(m.Run())
}

// InMemory is the number of the state's items in memory (tests).
func (s *State) InMemory() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	s.eachInMemory(func(int, *CheckpointItem) { n++ })
	return n
}

// Footprint is what the state holds for its items beyond the items in
// memory (tests): the chunks of its item table and the pages of row
// locations in memory.
func (s *State) Footprint() (chunks, pages int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tab != nil {
		for _, c := range s.tab.chunks {
			if c != nil {
				chunks++
			}
		}
	}
	return chunks, s.locs.resident
}
