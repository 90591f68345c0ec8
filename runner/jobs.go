package runner

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Jobs lists every job with a checkpoint under home, sorted by job id.
func Jobs(home string) ([]Paths, error) {
	matches, err := filepath.Glob(filepath.Join(home, "state", "*", "jobs", "*", "checkpoint.json"))
	if err != nil {
		return nil, err
	}
	out := make([]Paths, 0, len(matches))
	for _, m := range matches {
		jobDir := filepath.Dir(m)
		repo := filepath.Base(filepath.Dir(filepath.Dir(jobDir)))
		out = append(out, Paths{Home: home, Repo: repo, JobID: filepath.Base(jobDir)})
	}
	sort.Slice(out, func(a, b int) bool { return out[a].JobID < out[b].JobID })
	return out, nil
}

// FindJob locates a job by id. With jobID "" it returns the only job in the
// store, or an error listing them when there are several.
func FindJob(home, jobID string) (Paths, error) {
	jobs, err := Jobs(home)
	if err != nil {
		return Paths{}, err
	}
	if jobID == "" {
		switch len(jobs) {
		case 0:
			return Paths{}, usage(fmt.Errorf("no jobs in %s", home))
		case 1:
			return jobs[0], nil
		}
		ids := make([]string, len(jobs))
		for i, p := range jobs {
			ids[i] = p.JobID
		}
		return Paths{}, usage(fmt.Errorf("several jobs in %s; name one of: %s", home, strings.Join(ids, ", ")))
	}
	if err := ValidJobID(jobID); err != nil {
		return Paths{}, usage(err)
	}
	var found []Paths
	for _, p := range jobs {
		if p.JobID == jobID {
			found = append(found, p)
		}
	}
	switch len(found) {
	case 0:
		return Paths{}, usage(fmt.Errorf("job %s not found in %s", jobID, home))
	case 1:
		return found[0], nil
	}
	return Paths{}, usage(fmt.Errorf("job id %s exists for several repositories (%s, %s)", jobID, found[0].Repo, found[1].Repo))
}

// Status reports a job's state from its checkpoint.
func Status(home, jobID string) (*Result, error) {
	p, err := FindJob(home, jobID)
	if err != nil {
		return nil, err
	}
	cp, err := loadCheckpoint(p)
	if err != nil {
		return nil, err
	}
	res := cp.result()
	if f, err := LoadOrphans(p.Orphans()); err == nil {
		res.OrphanedWorktrees = f.Worktrees
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	if res.OrphanedWorktrees == nil {
		res.OrphanedWorktrees = []OrphanedWorktree{}
	}
	if n, err := countDLQ(p); err == nil {
		res.DLQCount = n
	}
	if cp.Status == StatusRunning && !jobLocked(p) {
		res.Error = "the process running this job is gone; continue with `resume " + cp.JobID + "`"
	}
	return res, nil
}

// jobLocked reports whether a live process holds the job lock.
func jobLocked(p Paths) bool {
	if _, err := os.Stat(p.Lock()); err != nil {
		return false
	}
	unlock, err := lockJob(p)
	if err != nil {
		return true
	}
	unlock()
	return false
}
