package spend

import "sync"

// Budget reserves item budgets from the job budget: an item starts
// only when its reservation fits in what the job has left after the spend
// of finished items (all runs of the job) and the reservations of running
// ones; the unspent part of a reservation is released when the item ends.
// So the job's spend stays within its budget as long as Claude Code keeps
// each step within its --max-budget-usd. Safe for concurrent use.
type Budget struct {
	mu   sync.Mutex
	cond *sync.Cond
	// max is the job budget and item the item budget; 0 = none.
	max, item float64
	// committed is the spend of items not running; reserved the
	// reservations of running ones.
	committed, reserved float64
	active              int
	exhausted           bool
}

// NewBudget returns a budget of max dollars for the job (0: none) and item
// for each item (0: none), of which spent is already spent.
func NewBudget(max, item, spent float64) *Budget {
	b := &Budget{max: max, item: item, committed: spent}
	b.cond = sync.NewCond(&b.mu)
	return b
}

// Reserve takes the reservation of an item that already spent prior (in
// earlier runs). When it does not fit but items are running, it waits for
// them to release theirs; it returns false, and the budget is exhausted,
// when it cannot fit, or at once when stop() says the job is stopping.
func (b *Budget) Reserve(prior float64, stop func() bool) (float64, bool) {
	amount := 0.0
	if b.item > 0 {
		amount = max(b.item-prior, 0)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for {
		if stop() || b.exhausted {
			return 0, false
		}
		fits := b.max == 0 || (b.committed+b.reserved+amount <= b.max+Epsilon && b.committed < b.max-Epsilon)
		if fits {
			b.reserved += amount
			b.active++
			return amount, true
		}
		if b.active == 0 {
			b.exhausted = true
			return 0, false
		}
		b.cond.Wait()
	}
}

// Release ends a reservation; spent is what the item spent in this run.
func (b *Budget) Release(amount, spent float64) {
	b.mu.Lock()
	b.reserved -= amount
	b.committed += spent
	b.active--
	b.mu.Unlock()
	b.cond.Broadcast()
}

// Wake lets waiting reservations see that the job is stopping.
func (b *Budget) Wake() { b.cond.Broadcast() }

// Exhausted reports whether a reservation found the budget spent.
func (b *Budget) Exhausted() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.exhausted
}

// Max is the job budget (0: none).
func (b *Budget) Max() float64 { return b.max }

// ItemMax is the item budget (0: none).
func (b *Budget) ItemMax() float64 { return b.item }

// Commit counts spend outside any reservation (setup and reduce steps):
// it is what items may no longer reserve.
func (b *Budget) Commit(spent float64) {
	b.mu.Lock()
	b.committed += spent
	b.mu.Unlock()
}
