package runner

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"github.com/prodigy-action/prodigy-action/dlq"
	"github.com/prodigy-action/prodigy-action/gitops"
	"github.com/prodigy-action/prodigy-action/internal/fsx"
	"github.com/prodigy-action/prodigy-action/jobstore"
)

// shardLive keeps a running shard's output directory current: after every
// item that reaches a final state the output is written again (writes
// coalesce: one runs at a time, and any number of items finishing during
// it cause one more), so a shard killed outright (SIGKILL, a runner that
// overran its time) leaves an output holding every item finished before
// its last write, and an `if: always()` upload or a later gather loses at
// most the items in flight. The format is the final output's
// (writeShardOutput); result.json lists the unfinished items as pending
// (or running, for those in flight when it was written),
// which gather leaves pending.
type shardLive struct {
	j       *job
	sr      ShardResult // PlanID, Shard, BaseCommit and RunAttempt
	out     string
	kick    chan struct{}
	done    chan struct{}
	mu      sync.Locker // one write at a time, the final one included
	seq     int         // writes so far (under mu)
	written func(seq int)
}

// startShardLive starts the live writer; lock (nil: one of its own) is
// held during every write, written (may be nil) is told of each.
func startShardLive(ctx context.Context, j *job, sr ShardResult, out string, lock sync.Locker, written func(int)) *shardLive {
	if lock == nil {
		lock = new(sync.Mutex)
	}
	if written == nil {
		written = func(int) {}
	}
	l := &shardLive{j: j, sr: sr, out: out, kick: make(chan struct{}, 1), done: make(chan struct{}), mu: lock, written: written}
	j.hooks = liveHooks{Hooks: j.hooks, kick: l.poke}
	go func() {
		defer close(l.done)
		for range l.kick {
			var res *Result
			j.state.Read(func(cp *jobstore.Checkpoint) { res = resultOf(cp) })
			sr := l.sr
			sr.Result = res
			if err := l.write(ctx, &sr); err != nil {
				j.warn(fmt.Sprintf("shard output not updated: %v", err))
			}
		}
	}()
	return l
}

// poke asks for a write (never blocks).
func (l *shardLive) poke() {
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

// stop ends the live writes; the last one in progress completes.
func (l *shardLive) stop() {
	close(l.kick)
	<-l.done
}

// write writes sr as the next output (numbering it) and tells written.
func (l *shardLive) write(ctx context.Context, sr *ShardResult) error {
	l.mu.Lock()
	l.seq++
	sr.OutputSeq = l.seq
	err := l.j.writeShardOutput(ctx, sr, l.out)
	l.mu.Unlock()
	if err != nil {
		return err
	}
	l.written(sr.OutputSeq)
	return nil
}

// liveHooks pokes the live writer after every finished item.
type liveHooks struct {
	Hooks
	kick func()
}

func (h liveHooks) ItemFinished(item ItemOutcome, log string) {
	h.Hooks.ItemFinished(item, log)
	h.kick()
}

// writeShardOutput writes the shard's output directory so that it is
// whole at every moment: everything is first written to a staging
// directory next to it (out + ".next", not inside the uploaded directory),
// then moved in — new DLQ records and events.jsonl, then shard.bundle and
// right after it result.json, then records no longer in the DLQ are
// removed. A kill between the bundle's rename and result.json's (two
// renames) leaves a result.json naming the previous head, which gather
// refuses as unreadable; at any other moment the directory is a whole
// output, the previous or the new one.
func (j *job) writeShardOutput(ctx context.Context, sr *ShardResult, out string) error {
	stage := out + ".next"
	if err := os.RemoveAll(stage); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(stage, ShardDLQDir), 0o755); err != nil {
		return err
	}
	defer os.RemoveAll(stage)
	if err := os.MkdirAll(filepath.Join(out, ShardDLQDir), 0o755); err != nil {
		return err
	}
	head, err := j.git.ResolveRef(ctx, "refs/heads/"+j.branch)
	if err != nil {
		return err
	}
	sr.Head = head
	bundle := true
	if err := j.git.BundleCreate(ctx, filepath.Join(stage, ShardBundleFile), "refs/heads/"+j.branch, sr.BaseCommit); errors.Is(err, gitops.ErrEmptyBundle) {
		bundle = false
	} else if err != nil {
		return err
	}
	store, err := openDLQ(j.paths, dlq.Options{})
	if err != nil {
		return err
	}
	defer store.Close() // read only: nothing to flush
	names := map[string]bool{}
	err = store.Each(func(r dlq.DeadLetteredItem) error {
		b, err := dlq.Encode(r)
		if err != nil {
			return err
		}
		name := dlq.ItemFileName(r.ItemID)
		names[name] = true
		return fsx.WriteFile(filepath.Join(stage, ShardDLQDir, name), b, 0o644)
	})
	if err != nil {
		return fmt.Errorf("export the shard's DLQ: %w", err)
	}
	events := true
	if data, err := os.ReadFile(j.paths.Events()); err == nil {
		if err := fsx.WriteFile(filepath.Join(stage, ShardEventsFile), data, 0o644); err != nil {
			return err
		}
	} else if errors.Is(err, fs.ErrNotExist) {
		events = false
	} else {
		return err
	}
	if err := writeJSONFile(filepath.Join(stage, ShardResultFile), sr); err != nil {
		return err
	}
	// Move in: records and events first (gather ignores records of items
	// result.json does not list as failed), then the bundle and result.json.
	for name := range names {
		if err := os.Rename(filepath.Join(stage, ShardDLQDir, name), filepath.Join(out, ShardDLQDir, name)); err != nil {
			return err
		}
	}
	if events {
		if err := os.Rename(filepath.Join(stage, ShardEventsFile), filepath.Join(out, ShardEventsFile)); err != nil {
			return err
		}
	}
	if bundle {
		if err := os.Rename(filepath.Join(stage, ShardBundleFile), filepath.Join(out, ShardBundleFile)); err != nil {
			return err
		}
	} else if err := os.Remove(filepath.Join(out, ShardBundleFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := os.Rename(filepath.Join(stage, ShardResultFile), filepath.Join(out, ShardResultFile)); err != nil {
		return err
	}
	old, err := os.ReadDir(filepath.Join(out, ShardDLQDir))
	if err != nil {
		return err
	}
	for _, e := range old {
		if !names[e.Name()] {
			if err := os.RemoveAll(filepath.Join(out, ShardDLQDir, e.Name())); err != nil {
				return err
			}
		}
	}
	return nil
}
