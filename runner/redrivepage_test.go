package runner_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prodigy-action/prodigy-action/runner"
)

// TestDLQRetryPagesTheSelection: a redrive of 23 records with pages of 10
// adds and maps at most 10 items at a time; interrupted in its second
// page, it loses nothing, and a second `dlq retry` finishes the rest:
// every record merged exactly once, the DLQ empty.
func TestDLQRetryPagesTheSelection(t *testing.T) {
	t.Parallel()
	const n, page = 23, 10
	r := newTestRepo(t, map[string]string{"items.json": itemsJSON(n)})
	fixed := filepath.Join(t.TempDir(), "fixed")
	wf := r.Workflow(fmt.Sprintf(`
name: paged
mode: mapreduce
map:
  input: items.json
  max_parallel: 3
  agent_template:
    - shell: |
        if [ ! -e %s ]; then echo "service unavailable: network timeout" >&2; exit 1; fi
        echo "${item.n}" > "out-${item.n}.txt" && git add . && git commit -qm "item ${item.n}"
  error_policy:
    circuit_breaker: false # every item fails the same way on purpose: the DLQ is the subject
    retry_config:
      attempts: 1
`, fixed))
	o, _, stderr, _ := r.options(wf)
	if res, err := r.run(o); err != nil || res.Failed != n {
		t.Fatalf("run: %v %+v\n%s", err, res, stderr)
	}
	if err := os.WriteFile(fixed, nil, 0o644); err != nil {
		t.Fatal(err)
	}

	// First redrive: interrupted after 12 items finished (in page 2).
	o1, _, stderr1, hooks := r.options(nil)
	o1.InterruptGrace = time.Minute
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hooks.OnItem = func(k int) {
		if k == 12 {
			cancel()
		}
	}
	res1, err := retryDLQ(ctx, RetryOptions{Home: r.Home, JobID: "job-1", MaxRetries: 1, Parallel: 3, BatchSize: page, Run: o1})
	if !errors.Is(err, runner.ErrInterrupted) {
		t.Fatalf("first redrive: %v, want interrupted\n%s", err, stderr1)
	}
	if !strings.Contains(stderr1.String(), "in pages of 10") {
		t.Errorf("no paging in the log:\n%s", stderr1)
	}
	left := len(r.DLQRecords("job-1"))
	if res1.Successful < 12 || res1.Successful >= n || left != n-res1.Successful {
		t.Fatalf("after the interrupt: %d merged, %d records left of %d", res1.Successful, left, n)
	}

	// Second redrive finishes.
	o2, _, stderr2, _ := r.options(nil)
	res2, err := retryDLQ(context.Background(), RetryOptions{Home: r.Home, JobID: "job-1", MaxRetries: 1, Parallel: 3, BatchSize: page, Run: o2})
	if err != nil || res2.Successful != n || res2.DLQCount != 0 || res2.Pending != 0 {
		t.Fatalf("second redrive: %v %+v\n%s", err, res2, stderr2)
	}
	if recs := r.DLQRecords("job-1"); len(recs) != 0 {
		t.Errorf("%d records left", len(recs))
	}
	// Every item merged exactly once (one merge commit per trailer).
	ids := strings.Fields(r.Git("log", "--merges", "--format=%(trailers:key=Prodigy-Item,valueonly)", res2.ResultsBranch))
	slices.Sort(ids)
	if len(ids) != n || len(slices.Compact(slices.Clone(ids))) != n {
		t.Errorf("merged item trailers %v: want each of %d items once", ids, n)
	}

	// The redrives mapped pages of at most 10 items: the map phases after
	// the first run's.
	raw, err := os.ReadFile(runner.Paths{Home: r.Home, Repo: filepath.Base(r.Dir), JobID: "job-1"}.Events())
	if err != nil {
		t.Fatal(err)
	}
	var sizes []int
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		var rec struct {
			Event struct {
				Type  string `json:"event_type"`
				Phase string `json:"phase"`
				Items int    `json:"items"`
			} `json:"event"`
		}
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Event.Type == "phase_started" && rec.Event.Phase == "map" {
			sizes = append(sizes, rec.Event.Items)
		}
	}
	if len(sizes) < 4 || sizes[0] != n {
		t.Fatalf("map phases of %v items: want the run's %d, then pages", sizes, n)
	}
	total := 0
	for _, s := range sizes[1:] {
		if s > page {
			t.Errorf("a redrive mapped %d items at once (pages of %d): %v", s, page, sizes)
		}
		total += s
	}
	if total < n {
		t.Errorf("redrive pages %v cover %d items, want at least %d", sizes[1:], total, n)
	}
}
