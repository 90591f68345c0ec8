package runner

// Process lifetime. No process a step starts outlives its step, nor the
// runner:
//
//   - Each step's process leads its own process group, and its environment
//     carries PRODIGY_PROCESS_TAG=<runner>/<job>/<n>, which everything it
//     starts inherits.
//   - When the step's process exits, its group and every descendant still
//     carrying its tag are killed and reaped. On Linux the runner is a child
//     subreaper (prctl PR_SET_CHILD_SUBREAPER), so descendants that left the
//     group with setsid are reparented to the runner and found among its
//     children (proclife_linux.go).
//   - When the runner dies (kill -9, OOM), each step's process gets SIGKILL
//     as its parent-death signal, and a watchdog process (a small bash
//     script reading the runner's end of a pipe) kills the groups and the
//     tagged processes the runner left.
//   - resume and dlq retry first end the processes an earlier execution of
//     the job left: the groups in its process record (pgroups.go) and every
//     process carrying the job's tag, and wait until they are gone.
//
// Limits: a process that both leaves the group and clears its environment
// (setsid env -i …), or that runs as another user, is not found; its output
// is dropped after the output grace.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// processTagEnv names the environment variable that tags every process a
// step starts.
const processTagEnv = "PRODIGY_PROCESS_TAG"

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
func (t *procTable) newGroup(rec *processRecord) *stepGroup {
	key := "-"
	if rec != nil {
		key = rec.jobKey
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

// jobProcessKey identifies a job in process tags: a hash of its state
// directory, so equal job ids in two repositories or homes never match.
func jobProcessKey(p Paths) string {
	dir := p.JobStateDir()
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	return shortHash(dir)
}

type processRecordKey struct{}

// withProcessRecord returns ctx carrying the job's process record: steps
// run under it tag their processes with the job and record their groups.
func withProcessRecord(ctx context.Context, rec *processRecord) context.Context {
	return context.WithValue(ctx, processRecordKey{}, rec)
}

func processRecordFrom(ctx context.Context) *processRecord {
	rec, _ := ctx.Value(processRecordKey{}).(*processRecord)
	return rec
}
