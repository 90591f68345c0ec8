package runner

// The engine's side of the job's process record (jobstore.ProcessRecord):
// each step's process group is recorded while it runs, and a resume or
// redrive ends what an earlier execution left running before it starts.

import (
	"crypto/sha256"
	"encoding/hex"

	"github.com/prodigy-action/prodigy-action/jobstore"
)

// pgroupEntry is one recorded process group.
type pgroupEntry = jobstore.ProcessGroup

// processRecord records the job's step process groups; a nil
// *processRecord records nothing.
type processRecord struct {
	rec    *jobstore.ProcessRecord
	jobKey string // jobProcessKey of the job, in its processes' tags
}

// openProcessRecord starts a fresh record for an execution of job p. Call
// it only after endJobLeftovers (or for a new job).
func openProcessRecord(p Paths) (*processRecord, error) {
	rec, err := jobstore.OpenProcessRecord(p)
	if err != nil {
		return nil, err
	}
	return &processRecord{rec: rec, jobKey: jobProcessKey(p)}, nil
}

// started records that g's group runs.
func (r *processRecord) started(g *stepGroup) error {
	if r == nil {
		return nil
	}
	boot, start := leaderIdentity(g.pgid)
	return r.rec.Started(jobstore.ProcessGroup{PGID: g.pgid, Tag: g.tag, BootID: boot, LeaderStart: start})
}

// ended records that g's group is gone.
func (r *processRecord) ended(g *stepGroup) error {
	if r == nil {
		return nil
	}
	return r.rec.Ended(g.pgid)
}

// close closes the record's file (the record stays on disk).
func (r *processRecord) close() {
	if r != nil {
		r.rec.Close()
	}
}

// readProcessRecord returns the groups job p's record lists as running.
func readProcessRecord(p Paths) ([]pgroupEntry, error) { return jobstore.ReadProcessRecord(p) }

// processGroupsFile is the record of job p.
func processGroupsFile(p Paths) string { return p.ProcessRecord() }

// endJobLeftovers ends every process an earlier execution of job p left
// running (recorded groups and processes tagged with the job), waits until
// they are gone, and logs what it did. Resume and redrive call it right
// after taking the job lock, before anything else runs: the lock proves the
// earlier runner is gone, and no old agent writes after this returns.
func endJobLeftovers(p Paths, logf func(string, ...any)) error {
	groups, err := readProcessRecord(p)
	if err != nil {
		return err
	}
	n, err := endLeftoverProcesses(p, groups)
	if n > 0 {
		logf("ended %d process(es) an earlier run of job %s left running", n, p.JobID)
	}
	return err
}

func shortHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:8])
}
