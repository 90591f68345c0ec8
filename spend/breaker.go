package spend

import "sync"

// Breaker detects a failure storm: Limit finished items in a row that
// failed with the same error signature (a broken dependency, prompt or
// key fails every item the same way). Once tripped it stays tripped; the
// engine then stops launching, lets running agents finish and leaves the
// rest pending. Outcomes that say nothing about the cause (rate limits and
// overloads, held by the fleet cool-down instead) are not observed. Safe
// for concurrent use; a nil *Breaker or Limit < 2 never trips.
type Breaker struct {
	// Limit is how many consecutive same-signature failures trip it.
	Limit int

	mu        sync.Mutex
	signature string   // of the current run of failures
	items     []string // the items of the current run, in finishing order
	tripped   *Storm
}

// Storm is what tripped a breaker.
type Storm struct {
	// Signature is the error signature the items shared.
	Signature string `json:"signature"`
	// Items are the ids of the consecutive failed items, in finishing order.
	Items []string `json:"items"`
	// Limit is the breaker's threshold.
	Limit int `json:"consecutive"`
}

// Succeeded records a finished item that succeeded (or was skipped by a
// filter, not a failure): the run of failures is broken.
func (b *Breaker) Succeeded() {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.signature, b.items = "", nil
}

// Failed records a finished item that failed with signature and reports
// the storm when this failure trips the breaker (nil otherwise, and nil
// for every later call: it trips once).
func (b *Breaker) Failed(item, signature string) *Storm {
	if b == nil || b.Limit < 2 {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.tripped != nil {
		return nil
	}
	if signature != b.signature {
		b.signature, b.items = signature, nil
	}
	b.items = append(b.items, item)
	if len(b.items) < b.Limit {
		return nil
	}
	b.tripped = &Storm{Signature: signature, Items: append([]string(nil), b.items...), Limit: b.Limit}
	return b.tripped
}

// Tripped is the storm that tripped the breaker, or nil.
func (b *Breaker) Tripped() *Storm {
	if b == nil {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.tripped
}
