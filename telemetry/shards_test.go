package telemetry_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prodigy-action/prodigy-action/config"
	"github.com/prodigy-action/prodigy-action/gitops/gitopstest"
	"github.com/prodigy-action/prodigy-action/retry/retrytest"
	"github.com/prodigy-action/prodigy-action/runner"
	"github.com/prodigy-action/prodigy-action/shard"
	"github.com/prodigy-action/prodigy-action/telemetry"
	"github.com/prodigy-action/prodigy-action/telemetry/otlptest"
)

const shardedWorkflow = `
name: sharded
mode: mapreduce
setup:
  - shell: echo s > setup.txt && git add -A && git commit -qm setup
map:
  input: items.json
  max_parallel: 1
  agent_template:
    - shell: echo "$PRODIGY_ITEM_INDEX" > "f$PRODIGY_ITEM_INDEX.txt" && git add -A && git commit -qm "item $PRODIGY_ITEM_INDEX"
reduce:
  - shell: ls f*.txt | wc -l > count.txt && git add -A && git commit -qm reduce
`

// TestShardedJobIsOneTrace: plan, two shards (each in its own clone and
// its own tracer, as separate runners would be) and gather export one
// trace: the plan's job span is the root, the shards' and the gather's job
// spans are its children (the plan carries the trace context), and every
// item appears once, under its shard.
func TestShardedJobIsOneTrace(t *testing.T) {
	rcv, url := otlptest.NewHTTP(t)
	vars := env{"OTEL_EXPORTER_OTLP_ENDPOINT": url}
	origin := gitopstest.Repo(t, map[string]string{"items.json": `[1,2,3,4]`})
	path := filepath.Join(t.TempDir(), "workflow.yml")
	if err := os.WriteFile(path, []byte(shardedWorkflow), 0o644); err != nil {
		t.Fatal(err)
	}
	wf, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// traced runs one command of the job in repo with its own tracer.
	traced := func(repo string, f func(e *runner.Engine, repo string) error) {
		t.Helper()
		tr := telemetry.New(ctx, telemetry.Config{Getenv: vars.get, Warn: func(w string) { t.Errorf("warning: %s", w) }})
		e := &runner.Engine{
			Home:   filepath.Join(t.TempDir(), "home"),
			Stderr: &lines{}, Clock: retrytest.NewFakeClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)), Rand: func() float64 { return 0.5 },
			Getenv: func(string) string { return "" }, Tracer: tr.Tracer(),
		}
		if err := f(e, repo); err != nil {
			t.Fatal(err)
		}
		if err := tr.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
	}
	clone := func(name string) string {
		dir := filepath.Join(t.TempDir(), name)
		gitopstest.Out(t, filepath.Dir(dir), "clone", "-q", origin, dir)
		return dir
	}
	plan := filepath.Join(t.TempDir(), "plan")
	traced(clone("planner"), func(e *runner.Engine, repo string) error {
		_, err := shard.NewPlan(ctx, e, shard.PlanSpec{Workflow: wf, RepoDir: repo, JobID: "job-1", Dir: plan, Shards: 2})
		return err
	})
	var outs []string
	for k := range 2 {
		out := filepath.Join(t.TempDir(), fmt.Sprintf("out%d", k))
		outs = append(outs, out)
		traced(clone(fmt.Sprintf("shard%d", k)), func(e *runner.Engine, repo string) error {
			_, err := shard.Run(ctx, e, shard.RunSpec{RepoDir: repo, PlanDir: plan, Shard: k, OutDir: out})
			return err
		})
	}
	traced(clone("gatherer"), func(e *runner.Engine, repo string) error {
		_, err := shard.Gather(ctx, e, shard.GatherSpec{RepoDir: repo, PlanDir: plan, Outputs: outs})
		return err
	})

	_, spans, _ := rcv.Snapshot()
	tr := tree{t: t, spans: spans}
	for _, s := range spans {
		if !bytes.Equal(s.GetTraceId(), spans[0].GetTraceId()) {
			t.Fatalf("spans of several traces:%s", tr)
		}
	}
	jobs := tr.named("job")
	if len(jobs) != 4 {
		t.Fatalf("%d job spans, want plan, 2 shards and gather:%s", len(jobs), tr)
	}
	var root []string
	rootSpan := jobs[0]
	for _, s := range jobs {
		if len(s.GetParentSpanId()) == 0 {
			root = append(root, hex.EncodeToString(s.GetSpanId()))
			rootSpan = s
		}
	}
	if len(root) != 1 || attr(rootSpan, "prodigy.outcome") != "planned" {
		t.Fatalf("root job spans %v, want the plan's alone:%s", root, tr)
	}
	if kids := tr.children(rootSpan, "job"); len(kids) != 3 {
		t.Fatalf("%d job spans under the plan's, want 3:%s", len(kids), tr)
	}
	if setup := tr.children(rootSpan, "setup"); len(setup) != 1 {
		t.Errorf("the plan's span has %d setup phase(s), want 1", len(setup))
	}
	seen := map[any]int{}
	for _, s := range tr.named("item") {
		seen[attr(s, "prodigy.item.id")]++
	}
	if len(seen) != 4 {
		t.Fatalf("item spans %v, want 4 items", seen)
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("item %v has %d spans, want 1", id, n)
		}
	}
	if len(tr.named("reduce")) != 1 {
		t.Errorf("%d reduce spans, want the gather's one", len(tr.named("reduce")))
	}
}
