package dlq

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// JobRef names one job that has a DLQ under a state directory.
type JobRef struct {
	Repo  string `json:"repo"`
	JobID string `json:"job_id"`
	// Dir is JobDir(home, Repo, JobID).
	Dir string `json:"dir"`
}

// Jobs lists every job with a DLQ directory under home/dlq, sorted by repo
// then job id. A missing home/dlq yields no jobs. Job directories starting
// with '.' (a Clear in progress) are ignored.
func Jobs(home string) ([]JobRef, error) {
	root := filepath.Join(home, "dlq")
	repos, err := os.ReadDir(root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list dlq jobs: %w", err)
	}
	var refs []JobRef
	for _, r := range repos {
		if !r.IsDir() {
			continue
		}
		jobs, err := os.ReadDir(filepath.Join(root, r.Name()))
		if err != nil {
			return nil, fmt.Errorf("list dlq jobs of %s: %w", r.Name(), err)
		}
		for _, j := range jobs {
			if !j.IsDir() || strings.HasPrefix(j.Name(), ".") {
				continue
			}
			dir := JobDir(home, r.Name(), j.Name())
			if fi, err := os.Stat(dir); err == nil && fi.IsDir() {
				refs = append(refs, JobRef{Repo: r.Name(), JobID: j.Name(), Dir: dir})
			}
		}
	}
	sort.Slice(refs, func(i, k int) bool {
		if refs[i].Repo != refs[k].Repo {
			return refs[i].Repo < refs[k].Repo
		}
		return refs[i].JobID < refs[k].JobID
	})
	return refs, nil
}
