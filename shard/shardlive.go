package shard

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
	"github.com/prodigy-action/prodigy-action/runner"
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
	j       *runner.Job
	sr      Result // PlanID, Shard, BaseCommit and RunAttempt
	out     string
	kick    chan struct{}
	done    chan struct{}
	mu      sync.Locker // one write at a time, the final one included
	seq     int         // writes so far (under mu)
	written func(seq int)
}

// newLive makes the live writer; lock (nil: one of its own) is held during
// every write, written (may be nil) is told of each. Pokes before start
// are kept (one write).
func newLive(sr Result, out string, lock sync.Locker, written func(int)) *shardLive {
	if lock == nil {
		lock = new(sync.Mutex)
	}
	if written == nil {
		written = func(int) {}
	}
	return &shardLive{sr: sr, out: out, kick: make(chan struct{}, 1), done: make(chan struct{}), mu: lock, written: written}
}

// start starts the live writes of job j's output.
func (l *shardLive) start(ctx context.Context, j *runner.Job) {
	l.j = j
	go func() {
		defer close(l.done)
		for range l.kick {
			sr := l.sr
			sr.Result = j.Result()
			if err := l.write(ctx, &sr); err != nil {
				j.Warn(fmt.Sprintf("shard output not updated: %v", err))
			}
		}
	}()
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
func (l *shardLive) write(ctx context.Context, sr *Result) error {
	l.mu.Lock()
	l.seq++
	sr.OutputSeq = l.seq
	err := writeShardOutput(ctx, l.j, sr, l.out)
	l.mu.Unlock()
	if err != nil {
		return err
	}
	l.written(sr.OutputSeq)
	return nil
}

// liveHooks pokes the live writer after every finished item; Hooks (nil:
// none) get every call first.
type liveHooks struct {
	Hooks runner.Hooks
	kick  func()
}

func (h liveHooks) ItemFinished(item runner.ItemOutcome, log string) {
	if h.Hooks != nil {
		h.Hooks.ItemFinished(item, log)
	}
	h.kick()
}

func (h liveHooks) Warning(msg string) {
	if h.Hooks != nil {
		h.Hooks.Warning(msg)
	}
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
func writeShardOutput(ctx context.Context, j *runner.Job, sr *Result, out string) error {
	stage := out + ".next"
	if err := os.RemoveAll(stage); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(stage, DLQDir), 0o755); err != nil {
		return err
	}
	defer os.RemoveAll(stage)
	if err := os.MkdirAll(filepath.Join(out, DLQDir), 0o755); err != nil {
		return err
	}
	git, paths := j.Git(), j.Paths()
	head, err := git.ResolveRef(ctx, "refs/heads/"+j.Branch())
	if err != nil {
		return err
	}
	sr.Head = head
	bundle := true
	if err := git.BundleCreate(ctx, filepath.Join(stage, BundleFile), "refs/heads/"+j.Branch(), sr.BaseCommit); errors.Is(err, gitops.ErrEmptyBundle) {
		bundle = false
	} else if err != nil {
		return err
	}
	store, err := dlq.Open(paths.DLQRoot(), paths.JobID, dlq.Options{})
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
		return fsx.WriteFile(filepath.Join(stage, DLQDir, name), b, 0o644)
	})
	if err != nil {
		return fmt.Errorf("export the shard's DLQ: %w", err)
	}
	events := true
	if data, err := os.ReadFile(paths.Events()); err == nil {
		if err := fsx.WriteFile(filepath.Join(stage, EventsFile), data, 0o644); err != nil {
			return err
		}
	} else if errors.Is(err, fs.ErrNotExist) {
		events = false
	} else {
		return err
	}
	if err := writeJSONFile(filepath.Join(stage, ResultFile), sr); err != nil {
		return err
	}
	// Move in: records and events first (gather ignores records of items
	// result.json does not list as failed), then the bundle and result.json.
	for name := range names {
		if err := os.Rename(filepath.Join(stage, DLQDir, name), filepath.Join(out, DLQDir, name)); err != nil {
			return err
		}
	}
	if events {
		if err := os.Rename(filepath.Join(stage, EventsFile), filepath.Join(out, EventsFile)); err != nil {
			return err
		}
	}
	if bundle {
		if err := os.Rename(filepath.Join(stage, BundleFile), filepath.Join(out, BundleFile)); err != nil {
			return err
		}
	} else if err := os.Remove(filepath.Join(out, BundleFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := os.Rename(filepath.Join(stage, ResultFile), filepath.Join(out, ResultFile)); err != nil {
		return err
	}
	old, err := os.ReadDir(filepath.Join(out, DLQDir))
	if err != nil {
		return err
	}
	for _, e := range old {
		if !names[e.Name()] {
			if err := os.RemoveAll(filepath.Join(out, DLQDir, e.Name())); err != nil {
				return err
			}
		}
	}
	return nil
}
