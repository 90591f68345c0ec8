package runner_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/prodigy-action/prodigy-action/config"
	"github.com/prodigy-action/prodigy-action/retry/retrytest"
	"github.com/prodigy-action/prodigy-action/runner"
	"github.com/prodigy-action/prodigy-action/runner/runnertest"
)

// testRepo is a real git repository in a temp dir with one commit and a
// state directory (runnertest.Repo), with this package's ways to run it.
type testRepo struct{ *runnertest.Repo }

func newTestRepo(t *testing.T, files map[string]string) *testRepo {
	return &testRepo{runnertest.NewRepo(t, files)}
}

type (
	hookLog    = runnertest.HookLog
	syncBuffer = runnertest.SyncBuffer
)

// options returns runner options for the repo with a fake clock.
func (r *testRepo) options(wf *config.Workflow) (Options, *retrytest.FakeClock, *syncBuffer, *hookLog) {
	clock := retrytest.NewFakeClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	stderr := &syncBuffer{}
	hooks := &hookLog{}
	return Options{
		Workflow: wf, RepoDir: r.Dir, Home: r.Home, JobID: "job-1",
		Stderr: stderr, Hooks: hooks, Clock: clock, Rand: func() float64 { return 0.5 },
		Getenv: func(string) string { return "" },
	}, clock, stderr, hooks
}

func (r *testRepo) run(o Options) (*runner.Result, error) {
	r.T.Helper()
	return runJob(context.Background(), o)
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
