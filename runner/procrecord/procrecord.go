// Package procrecord is the engine's side of a job's process record
// (jobstore.ProcessRecord): each step's process group is recorded while it
// runs (a procsup.Recorder), and a resume or redrive ends what an earlier
// execution left running before it starts (procsup.EndLeftovers).
package procrecord

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"path/filepath"

	"github.com/prodigy-action/prodigy-action/internal/procsup"
	"github.com/prodigy-action/prodigy-action/jobstore"
)

// Record records the job's step process groups (procsup.Recorder).
type Record struct {
	rec    *jobstore.ProcessRecord
	jobKey string // JobKey of the job, in its processes' tags
}

// Open starts a fresh record for an execution of job p. Call it only after
// EndLeftovers (or for a new job).
func Open(p jobstore.Paths) (*Record, error) {
	rec, err := jobstore.OpenProcessRecord(p)
	if err != nil {
		return nil, err
	}
	return &Record{rec: rec, jobKey: JobKey(p)}, nil
}

// JobKey is the job's key in its processes' tags.
func (r *Record) JobKey() string { return r.jobKey }

// Started records that g runs.
func (r *Record) Started(g procsup.Group) error {
	return r.rec.Started(jobstore.ProcessGroup{PGID: g.PGID, Tag: g.Tag, BootID: g.BootID, LeaderStart: g.LeaderStart})
}

// Ended records that g is gone.
func (r *Record) Ended(g procsup.Group) error { return r.rec.Ended(g.PGID) }

// Close closes the record's file (the record stays on disk); a nil Record
// is a no-op.
func (r *Record) Close() {
	if r != nil {
		r.rec.Close()
	}
}

// With returns ctx whose steps record their groups in rec (nil: recorded
// nowhere, tagged with no job).
func With(ctx context.Context, rec *Record) context.Context {
	if rec == nil {
		return ctx
	}
	return procsup.WithRecorder(ctx, rec)
}

// JobKey identifies a job in process tags: a hash of its state
// directory, so equal job ids in two repositories or homes never match.
func JobKey(p jobstore.Paths) string {
	dir := p.JobStateDir()
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	return shortHash(dir)
}

// EndLeftovers ends every process an earlier execution of job p left
// running (recorded groups and processes tagged with the job), waits until
// they are gone, and logs what it did. Resume and redrive call it right
// after taking the job lock, before anything else runs: the lock proves the
// earlier runner is gone, and no old agent writes after this returns.
func EndLeftovers(p jobstore.Paths, logf func(string, ...any)) error {
	recorded, err := jobstore.ReadProcessRecord(p)
	if err != nil {
		return err
	}
	groups := make([]procsup.Group, 0, len(recorded))
	for _, g := range recorded {
		groups = append(groups, procsup.Group{PGID: g.PGID, Tag: g.Tag, BootID: g.BootID, LeaderStart: g.LeaderStart})
	}
	n, err := procsup.EndLeftovers(JobKey(p), p.JobID, groups)
	if n > 0 {
		logf("ended %d process(es) an earlier run of job %s left running", n, p.JobID)
	}
	return err
}

func shortHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:8])
}
