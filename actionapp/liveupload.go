package actionapp

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/prodigy-action/prodigy-action/ghaction"
)

// maxLiveUploads bounds the live uploads of one shard run: GitHub allows
// 500 artifacts per job, and the step's own upload and other steps' need
// some.
const maxLiveUploads = 400

// liveArtifacts is what liveUploads needs of the artifact service.
type liveArtifacts interface {
	UploadFrom(ctx context.Context, name string, blob ghaction.Blob, retentionDays int) (ghaction.UploadedArtifact, error)
	Delete(ctx context.Context, name string) (int64, error)
}

// liveUploads keeps a running shard's newest output among the run's
// artifacts, so that a runner that vanishes (its machine lost, a SIGKILL
// past GitHub's cancel sequence: the `if: always()` upload step never
// runs) loses at most the items in flight and the last interval's. The
// engine rewrites the output directory after every finished item
// (ShardOptions.Written); at most every interval the directory is zipped
// under the engine's output lock (a whole output, never a half-written
// one) and uploaded as <prefix><n>-<shard> (n = 1, 2, …: artifact names
// are immutable, and the shard index last keeps the fan-out's download
// pattern prodigy-shard-<job>-*-<shard> matching); once it is finalized
// the previous one is deleted, so one whole snapshot exists at every
// moment and at most two at once. Gather and shard-continue pick the
// newest output by its result.json (run_attempt, output_seq), never by name.
type liveUploads struct {
	client   liveArtifacts
	dir      string // the shard's output directory
	tmpDir   string // where the zip is written
	prefix   string
	shard    int
	interval time.Duration
	days     int
	now      func() time.Time
	sleep    func(context.Context, time.Duration) error
	lock     *sync.Mutex // ShardOptions.OutputLock
	log      func(string)

	poke   chan struct{}
	done   chan struct{}
	cancel context.CancelFunc

	mu      sync.Mutex
	pending bool // written since the last snapshot

	n      int    // uploads made (loop or finish, never both at once)
	last   string // the newest uploaded artifact
	warned bool   // a delete failure was reported
}

// start starts the upload loop under ctx.
func (u *liveUploads) start(ctx context.Context) {
	u.poke, u.done = make(chan struct{}, 1), make(chan struct{})
	ctx, u.cancel = context.WithCancel(ctx)
	go u.run(ctx)
}

// written is ShardOptions.Written: the output changed.
func (u *liveUploads) written(int) {
	u.mu.Lock()
	u.pending = true
	u.mu.Unlock()
	select {
	case u.poke <- struct{}{}:
	default:
	}
}

// run uploads snapshots until ctx ends: the first as soon as an item
// finished, the next no sooner than interval after the previous started.
func (u *liveUploads) run(ctx context.Context) {
	defer close(u.done)
	var last time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-u.poke:
		}
		if !last.IsZero() {
			if wait := last.Add(u.interval).Sub(u.now()); wait > 0 {
				if u.sleep(ctx, wait) != nil {
					return
				}
			}
		}
		if u.n >= maxLiveUploads {
			u.log(fmt.Sprintf("live uploads stop at %d (GitHub's artifacts per job); the step's upload keeps the final output", maxLiveUploads))
			return
		}
		last = u.now()
		u.uploadPending(ctx)
	}
}

// finish stops the loop (an upload under way is cancelled; the snapshot
// before it stays) and, with ctx still alive, uploads what changed since
// the last snapshot: the final output, for a runner that vanishes before
// the step's own upload.
func (u *liveUploads) finish(ctx context.Context) {
	u.cancel()
	<-u.done
	if ctx.Err() == nil && u.n < maxLiveUploads {
		u.uploadPending(ctx)
	}
}

// uploadPending uploads a snapshot when the output changed since the last.
func (u *liveUploads) uploadPending(ctx context.Context) {
	u.mu.Lock()
	pending := u.pending
	u.pending = false
	u.mu.Unlock()
	if !pending {
		return
	}
	if err := u.upload(ctx); err != nil && ctx.Err() == nil {
		u.mu.Lock()
		u.pending = true // the next round tries again
		u.mu.Unlock()
		u.log(fmt.Sprintf("shard output not uploaded (the previous upload stays): %v", err))
	}
}

func (u *liveUploads) upload(ctx context.Context) error {
	f, err := os.CreateTemp(u.tmpDir, "shard-live-*.zip")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	u.lock.Lock()
	blob, err := ghaction.WriteDirZipFile(f, u.dir)
	u.lock.Unlock()
	if err != nil {
		return err
	}
	name := fmt.Sprintf("%s%d-%d", u.prefix, u.n+1, u.shard)
	up, err := u.client.UploadFrom(ctx, name, blob, u.days)
	if err != nil {
		return err
	}
	u.n++
	u.log(fmt.Sprintf("shard output uploaded as %s (%d bytes)", up.Name, up.Size))
	if prev := u.last; prev != "" {
		if _, err := u.client.Delete(ctx, prev); err != nil && !u.warned && !errors.Is(err, context.Canceled) {
			u.warned = true
			u.log(fmt.Sprintf("earlier shard output %s not deleted (gather still picks the newest): %v", prev, err))
		}
	}
	u.last = up.Name
	return nil
}
