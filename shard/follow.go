package shard

import (
	"context"
	"sync"

	"github.com/prodigy-action/prodigy-action/runner"
)

// parentFollower brings a gathering job's parent worktree up to the
// results branch in the background (runner.Job.SyncParent) after every
// shard merged, while the next merges: the merges run on one core, the
// checkouts of each shard's files on the other, and reduce is left the
// last shard's. Pokes coalesce (one sync at a time, any number of pokes
// during it cause one more). A sync always finishes (it is not cancelled
// with the gather, so no git is killed holding the parent's index lock),
// and one that fails is left to reduce, which syncs again. A nil follower
// does nothing.
type parentFollower struct {
	kick    chan struct{}
	done    chan struct{}
	once    sync.Once
	stopped bool // poke and stop are called by one goroutine
}

// followParent starts the follower of j's parent worktree.
func followParent(ctx context.Context, j *runner.Job) *parentFollower {
	f := &parentFollower{kick: make(chan struct{}, 1), done: make(chan struct{})}
	sctx := context.WithoutCancel(ctx)
	go func() {
		defer close(f.done)
		for range f.kick {
			if ctx.Err() != nil {
				continue // interrupted: no new checkout
			}
			if err := j.SyncParent(sctx); err != nil {
				j.Logf("parent worktree not updated while gathering (reduce updates it): %v", err)
			}
		}
	}()
	return f
}

// poke asks for a sync (never blocks; nothing after stop).
func (f *parentFollower) poke() {
	if f == nil || f.stopped {
		return
	}
	select {
	case f.kick <- struct{}{}:
	default:
	}
}

// stop ends the follower after the sync in progress, if any; safe to call
// more than once.
func (f *parentFollower) stop() {
	if f == nil {
		return
	}
	f.once.Do(func() {
		f.stopped = true
		close(f.kick)
		<-f.done
	})
}
