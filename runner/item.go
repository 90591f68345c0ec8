package runner

import (
	"encoding/json"
	"time"

	"github.com/prodigy-action/prodigy-action/dlq"
	"github.com/prodigy-action/prodigy-action/jobstore"
)

// item is the engine's work item while it runs: what the engine reads of
// it and every change it makes to it, each change one named transition
// and one journal write of the job's state. jobstore persists the item as
// its checkpoint row (jobstore.CheckpointItem); the item runner changes
// the row only through item's transitions, and the recoveries of resume
// and redrive through the row functions at the end of this file. The row
// is not copied: a job of a million items holds each once, in the
// checkpoint.
//
// Reads and transitions hold the state's lock; an item has one runner at
// a time, so nothing else changes its row in between.
type item struct {
	row   *jobstore.CheckpointItem
	state *jobstore.State
	// id, index and label are fixed when the job loads its items.
	id    string
	index int
	label string
}

// newItem returns the engine's item of row, a row of state's checkpoint.
func newItem(state *jobstore.State, row *jobstore.CheckpointItem) *item {
	return &item{row: row, state: state, id: row.ItemID, index: row.Index, label: row.Label}
}

// attemptsSpent is the number of attempts the item's attempt budget has
// paid for: attempts made, less those of an earlier budget (a redriven
// record's) and those lost to a crash.
func (it *item) attemptsSpent() int {
	var n int
	it.state.ReadHead(func(*jobstore.CheckpointHead) { n = spentAttempts(it.row) })
	return n
}

func spentAttempts(row *jobstore.CheckpointItem) int { return row.Attempts - row.BudgetBase - row.Lost }

// attempts is the number of the item's last attempt made.
func (it *item) attempts() int {
	var n int
	it.state.ReadHead(func(*jobstore.CheckpointHead) { n = it.row.Attempts })
	return n
}

// inFlightAttempt is the attempt the checkpoint says was running (0:
// none), its agent and since when.
type inFlightAttempt struct {
	attempt int
	agent   string
	since   *time.Time
}

// history is what earlier runs persisted: failed attempts not yet in a
// DLQ record (those that do not decode are left out), and the attempt that
// was running when the process running the job died.
func (it *item) history() (failures []dlq.Failure, running inFlightAttempt) {
	it.state.ReadHead(func(*jobstore.CheckpointHead) {
		for _, raw := range it.row.Failures {
			var f dlq.Failure
			if err := json.Unmarshal(raw, &f); err == nil {
				failures = append(failures, f)
			}
		}
		running = inFlightAttempt{attempt: it.row.InFlight, agent: it.row.InFlightAgent, since: it.row.InFlightSince}
	})
	return failures, running
}

// spent is what earlier runs of the job spent on the item (cost, of which
// base belongs to an earlier budget, and tokens).
func (it *item) spent() (cost, base float64, tokens jobstore.Tokens) {
	it.state.ReadHead(func(*jobstore.CheckpointHead) {
		cost, base = it.row.CostUSD, it.row.CostBase
		if it.row.Tokens != nil {
			tokens = *it.row.Tokens
		}
	})
	return cost, base, tokens
}

// outcome is the item's state as results report it.
func (it *item) outcome() ItemOutcome {
	var o ItemOutcome
	it.state.ReadHead(func(*jobstore.CheckpointHead) { o = it.row.ItemOutcome })
	return o
}

// start marks the item running. nextAgent is the job's agent count the
// checkpoint keeps; when running.attempt > 0, that attempt starts now
// (the same journal write); ceiling > 0 is the spend the item may reach.
func (it *item) start(nextAgent int, running inFlightAttempt, ceiling float64) error {
	return it.state.UpdateItem(it.row, func(cp *jobstore.Checkpoint) {
		it.row.State = ItemRunning
		cp.NextAgent = max(cp.NextAgent, nextAgent)
		if running.attempt > 0 {
			setInFlight(it.row, running)
		}
		if ceiling > 0 {
			it.row.SpendCeiling = ceiling
		}
	})
}

// attemptStarted marks an attempt running (lost if the process dies).
func (it *item) attemptStarted(running inFlightAttempt) error {
	return it.state.UpdateItem(it.row, func(*jobstore.Checkpoint) { setInFlight(it.row, running) })
}

// attemptLost records the attempt a dead process was running: a failure
// (enc, nil when it could not be encoded) that does not spend the attempt
// budget.
func (it *item) attemptLost(attempt int, enc json.RawMessage) error {
	return it.state.UpdateItem(it.row, func(*jobstore.Checkpoint) {
		it.row.Attempts = max(it.row.Attempts, attempt)
		it.row.Lost++
		if enc != nil {
			it.row.Failures = append(it.row.Failures, enc)
		}
		clearInFlight(it.row)
	})
}

// attemptFailed records a failed attempt (enc: its dlq.Failure) until a
// DLQ record holds it.
func (it *item) attemptFailed(attempt int, enc json.RawMessage) error {
	return it.state.UpdateItem(it.row, func(*jobstore.Checkpoint) {
		it.row.Attempts = max(it.row.Attempts, attempt)
		it.row.Failures = append(it.row.Failures, enc)
		clearInFlight(it.row)
	})
}

// saveSpend records what the item has cost over all runs of the job.
func (it *item) saveSpend(cost float64, tokens jobstore.Tokens) error {
	return it.state.UpdateItem(it.row, func(*jobstore.Checkpoint) {
		it.row.CostUSD = cost
		it.row.Tokens = &tokens
	})
}

// backToPending returns an interrupted item to pending: it runs again on
// resume.
func (it *item) backToPending() error {
	return it.state.UpdateItem(it.row, func(*jobstore.Checkpoint) {
		it.row.State, it.row.SpendCeiling = ItemPending, 0
		clearInFlight(it.row)
	})
}

// ending is how an item ended (item.finish).
type ending struct {
	state    ItemState
	attempts int // the number of its last attempt
	err      string
	errType  string
	commits  int
	took     time.Duration
	log      string // its last attempt's log
	timings  *Timings
	// mergeCommit is the results branch commit holding a merged item's
	// work ("" when it had nothing to merge).
	mergeCommit string
	// pending is the encoded DLQ record of a dlq item (nil otherwise): it
	// replaces the item's failures until the record is stored. A merged
	// or skipped item drops its failures.
	pending json.RawMessage
}

// finish records the item's final state.
func (it *item) finish(e ending) error {
	return it.state.UpdateItem(it.row, func(*jobstore.Checkpoint) {
		r := it.row
		r.State = e.state
		r.SpendCeiling = 0
		r.PendingRecord = e.pending
		if e.pending != nil || e.state != ItemDLQ {
			r.Failures = nil
		}
		r.Attempts = e.attempts
		clearInFlight(r)
		r.Error = e.err
		r.ErrorType = e.errType
		r.Commits = e.commits
		r.DurationMS = e.took.Milliseconds()
		r.LogLocation = e.log
		r.TimingsMS = e.timings
		if e.state == ItemMerged {
			r.MergeCommit = e.mergeCommit
		}
	})
}

// recordStored drops the item's pending DLQ record and failures once the
// DLQ holds them.
func recordStored(state *jobstore.State, row *jobstore.CheckpointItem) error {
	return state.UpdateItem(row, func(*jobstore.Checkpoint) { dropRecorded(row) })
}

// dropRecorded is recordStored under the state's lock.
func dropRecorded(row *jobstore.CheckpointItem) { row.PendingRecord, row.Failures = nil, nil }

// foundMerged marks an item a resume found merged on the results branch
// (by mergeCommit) though the checkpoint did not say so (under the state's
// lock). The attempt that merged ran: it counts even when the kill came
// before its outcome was checkpointed.
func foundMerged(row *jobstore.CheckpointItem, mergeCommit string) {
	row.State = ItemMerged
	row.MergeCommit = mergeCommit
	row.Commits = max(row.Commits, 1)
	row.Attempts = max(row.Attempts, row.InFlight, 1)
	row.Failures = nil
	clearInFlight(row)
}

// unmerged returns a merged item whose merge is not on the results branch
// to pending, saying why.
func unmerged(state *jobstore.State, row *jobstore.CheckpointItem, why string) error {
	return state.UpdateItem(row, func(*jobstore.Checkpoint) {
		row.State = ItemPending
		row.MergeCommit = ""
		row.Error = why
	})
}

// redriven makes a finished item pending again for a redrive of e, its
// DLQ record (under the state's lock). The redrive's attempt budget
// starts at the record's failure_count (e.Attempts); attempts an
// interrupted earlier redrive ran count against it; cost from here on is
// the redrive's.
func redriven(row, e *jobstore.CheckpointItem) {
	row.State = ItemPending
	row.Data, row.DataOff, row.DataLen = e.Data, 0, 0
	row.BudgetBase = e.Attempts
	row.Lost = 0 // lost attempts before the budget began are in BudgetBase
	row.CostBase = row.CostUSD
	row.Attempts = max(row.Attempts, e.Attempts)
}

// pendingAgain returns an item a dead process left running to pending
// (under the state's lock).
func pendingAgain(row *jobstore.CheckpointItem) { row.State = ItemPending }

// setInFlight marks an attempt running (under the state's lock).
func setInFlight(row *jobstore.CheckpointItem, a inFlightAttempt) {
	row.InFlight, row.InFlightAgent, row.InFlightSince = a.attempt, a.agent, a.since
}

// clearInFlight records that the item's attempt has an outcome (under the
// state's lock).
func clearInFlight(row *jobstore.CheckpointItem) {
	row.InFlight, row.InFlightAgent, row.InFlightSince = 0, "", nil
}
