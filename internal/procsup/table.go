package procsup

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// TagEnv names the environment variable that tags every process a step
// starts: <engine process nonce>/<job key>/<n>.
const TagEnv = "PRODIGY_PROCESS_TAG"

// stepGroup is one step's running process group.
type stepGroup struct {
	pgid int    // the step process's pid, set by procTable.start
	tag  string // <runner nonce>/<job key>/<n>
}

// procTable is the process-wide table of the step process groups this
// process runs. The platform files implement start, end and the rest.
type procTable struct {
	nonce string // this runner process, in tags
	seq   atomic.Int64

	once sync.Once // platform setup, on the first start
	mu   sync.Mutex
	live map[int]*stepGroup // by pgid, from start until the group is gone

	procTablePlatform
}

// procs is the table of this process. Process groups, the subreaper
// attribute and the watchdog belong to the process, hence one table.
var procs = newProcTable()

func newProcTable() *procTable {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return &procTable{nonce: hex.EncodeToString(b), live: map[int]*stepGroup{}}
}

// newGroup returns a group with a fresh tag for a step of the job that rec
// records (rec may be nil).
func (t *procTable) newGroup(rec Recorder) *stepGroup {
	key := "-"
	if rec != nil {
		key = rec.JobKey()
	}
	n := t.seq.Add(1)
	return &stepGroup{tag: t.nonce + "/" + key + "/" + strconv.FormatInt(n, 10)}
}

// tagJobKey returns the job key of a process tag ("" when malformed).
func tagJobKey(tag string) string {
	parts := strings.Split(tag, "/")
	if len(parts) != 3 {
		return ""
	}
	return parts[1]
}

// Group is a step's process group as a Recorder records it: enough to
// tell, in a later process, whether the group still belongs to the job.
type Group struct {
	PGID        int
	Tag         string // the step's TagEnv value
	BootID      string // the boot it ran in ("" outside Linux)
	LeaderStart uint64 // its leader's start time (since boot, in clock ticks)
}

// Recorder keeps a job's step process groups while they run (the job's
// process record), so that a later execution of the job ends what this one
// left (EndLeftovers). Its methods are called from several goroutines.
type Recorder interface {
	// JobKey identifies the job in process tags (see TagEnv).
	JobKey() string
	// Started records that the group runs; Ended that it is gone.
	Started(Group) error
	Ended(Group) error
}

type recorderKey struct{}

// WithRecorder returns ctx carrying the job's Recorder: steps run under it
// tag their processes with the job and record their groups.
func WithRecorder(ctx context.Context, rec Recorder) context.Context {
	return context.WithValue(ctx, recorderKey{}, rec)
}

func recorderFrom(ctx context.Context) Recorder {
	rec, _ := ctx.Value(recorderKey{}).(Recorder)
	return rec
}

// Identify returns the Group of the running process group pgid whose
// processes carry tag: with its boot and its leader's start time, which
// tell a later process whether pgid still names the same group.
func Identify(pgid int, tag string) Group {
	boot, start := leaderIdentity(pgid)
	return Group{PGID: pgid, Tag: tag, BootID: boot, LeaderStart: start}
}

// recordStarted and recordEnded tell rec (when not nil) about g.
func recordStarted(rec Recorder, g *stepGroup) error {
	if rec == nil {
		return nil
	}
	return rec.Started(Identify(g.pgid, g.tag))
}

func recordEnded(rec Recorder, g *stepGroup) error {
	if rec == nil {
		return nil
	}
	return rec.Ended(Group{PGID: g.pgid, Tag: g.tag})
}
