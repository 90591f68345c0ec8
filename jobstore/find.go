package jobstore

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Latest, given as a job id to FindJob, names the newest job (latest
// started_at) of the repository.
const Latest = "latest"

// Lookup errors of FindJob (wrapped; test with errors.Is). They are the
// user's input errors: the job named does not exist or is ambiguous.
var (
	ErrNoJob        = errors.New("no such job")
	ErrAmbiguousJob = errors.New("ambiguous job")
)

// Jobs lists every job with a checkpoint under home, sorted by job id then
// repository.
func Jobs(home string) ([]Paths, error) { return listJobs(home, true) }

// StateJobs lists every job with a state folder under home, with or
// without a checkpoint (a job can die before its first one), sorted like
// Jobs.
func StateJobs(home string) ([]Paths, error) { return listJobs(home, false) }

func listJobs(home string, checkpointed bool) ([]Paths, error) {
	dirs, err := filepath.Glob(filepath.Join(home, "state", "*", "jobs", "*"))
	if err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	out := make([]Paths, 0, len(dirs))
	for _, d := range dirs {
		repo := filepath.Base(filepath.Dir(filepath.Dir(d)))
		p := Paths{Home: home, Repo: repo, JobID: filepath.Base(d)}
		want := p.JobStateDir()
		if checkpointed {
			want = p.Checkpoint()
		}
		if st, err := os.Stat(want); err != nil || st.IsDir() != !checkpointed {
			continue
		}
		out = append(out, p)
	}
	sort.Slice(out, func(a, b int) bool {
		if out[a].JobID != out[b].JobID {
			return out[a].JobID < out[b].JobID
		}
		return out[a].Repo < out[b].Repo
	})
	return out, nil
}

// FindJob locates a job with a checkpoint. repo, when not "", limits the
// search to that repository. With jobID "" it returns the only job, or an
// error wrapping ErrAmbiguousJob that lists them when there are several;
// with Latest, the job whose checkpoint has the latest started_at (ties go
// to the greater job id). A missing job wraps ErrNoJob, an id in several
// repositories ErrAmbiguousJob, an invalid id is returned as such.
func FindJob(home, repo, jobID string) (Paths, error) {
	all, err := Jobs(home)
	if err != nil {
		return Paths{}, err
	}
	var jobs []Paths
	for _, p := range all {
		if repo == "" || p.Repo == repo {
			jobs = append(jobs, p)
		}
	}
	where := home
	if repo != "" {
		where = fmt.Sprintf("%s for repository %s", home, repo)
	}
	switch jobID {
	case "":
		switch len(jobs) {
		case 0:
			return Paths{}, fmt.Errorf("%w: no jobs in %s", ErrNoJob, where)
		case 1:
			return jobs[0], nil
		}
		ids := make([]string, len(jobs))
		for i, p := range jobs {
			ids[i] = p.JobID
		}
		return Paths{}, fmt.Errorf("%w: several jobs in %s; name one of: %s", ErrAmbiguousJob, where, strings.Join(ids, ", "))
	case Latest:
		return latest(jobs, where)
	}
	if err := ValidJobID(jobID); err != nil {
		return Paths{}, err
	}
	var found []Paths
	for _, p := range jobs {
		if p.JobID == jobID {
			found = append(found, p)
		}
	}
	switch len(found) {
	case 0:
		return Paths{}, fmt.Errorf("%w: job %s not found in %s", ErrNoJob, jobID, where)
	case 1:
		return found[0], nil
	}
	return Paths{}, fmt.Errorf("%w: job id %s exists for several repositories (%s, %s)", ErrAmbiguousJob, jobID, found[0].Repo, found[1].Repo)
}

// latest picks the job with the newest started_at; unreadable checkpoints
// are skipped.
func latest(jobs []Paths, where string) (Paths, error) {
	var (
		best   Paths
		bestAt int64
		found  bool
	)
	for _, p := range jobs {
		cp, err := LoadCheckpoint(p)
		if err != nil {
			continue
		}
		at := cp.StartedAt.UnixNano()
		if !found || at > bestAt || at == bestAt && p.JobID > best.JobID {
			best, bestAt, found = p, at, true
		}
	}
	if !found {
		return Paths{}, fmt.Errorf("%w: no readable job in %s", ErrNoJob, where)
	}
	return best, nil
}

// DLQJobs lists every job that has a DLQ folder under home/dlq, sorted by
// repository then job id. A missing home/dlq yields no jobs. Folders
// starting with '.' (a DLQ Clear in progress) are ignored.
func DLQJobs(home string) ([]Paths, error) {
	root := filepath.Join(home, "dlq")
	repos, err := os.ReadDir(root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list dlq jobs: %w", err)
	}
	var out []Paths
	for _, r := range repos {
		if !r.IsDir() {
			continue
		}
		jobs, err := os.ReadDir(filepath.Join(root, r.Name()))
		if err != nil {
			return nil, fmt.Errorf("list dlq jobs of %s: %w", r.Name(), err)
		}
		for _, j := range jobs {
			if j.IsDir() && !strings.HasPrefix(j.Name(), ".") {
				out = append(out, Paths{Home: home, Repo: r.Name(), JobID: j.Name()})
			}
		}
	}
	sort.Slice(out, func(i, k int) bool {
		if out[i].Repo != out[k].Repo {
			return out[i].Repo < out[k].Repo
		}
		return out[i].JobID < out[k].JobID
	})
	return out, nil
}
