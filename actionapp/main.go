// Package actionapp is the GitHub Action application: it reads the
// Action's inputs, runs a workflow or redrives an earlier run's dead letter
// queue through the runner, uploads the DLQ as an artifact, writes the job
// summary, posts the sticky PR comment, sets the outputs and pushes the
// results branch. Every side effect comes in through Deps, so tests run it
// in-process against temp dirs and a local HTTP server.
package actionapp

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/prodigy-action/prodigy-action/ghaction"
	"github.com/prodigy-action/prodigy-action/runner"
)

// Exit codes of the command line contract (DESIGN.md).
const (
	exitOK        = runner.ExitOK
	exitJobFailed = runner.ExitFailed
	exitUsage     = runner.ExitUsage
)

// Engine is the part of the runner the Action drives through Deps.Engine
// (*runner.Engine's methods); tests may wrap it.
type Engine interface {
	Run(ctx context.Context, s runner.RunSpec) (*runner.Result, error)
	Redrive(ctx context.Context, s runner.RedriveSpec) (*runner.Result, error)
}

// Clock is the runner's clock (retry.Clock's method set).
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// Sleep waits for d or until ctx is cancelled.
	Sleep(ctx context.Context, d time.Duration) error
}

// now is the Clock's time, or the real time without one.
func (d Deps) now() time.Time {
	if d.Clock == nil {
		return time.Now()
	}
	return d.Clock.Now()
}

// sleep is the Clock's Sleep, or a real one without a Clock.
func (d Deps) sleep(ctx context.Context, dur time.Duration) error {
	if d.Clock != nil {
		return d.Clock.Sleep(ctx, dur)
	}
	return ghaction.SleepContext(ctx, dur)
}

// Deps carries every side effect of the Action. Zero fields take the
// defaults documented on each.
type Deps struct {
	// Getenv reads the environment (inputs, GITHUB_*); nil means os.Getenv.
	Getenv func(string) string
	// Environ returns the process environment, the base of the agents' and
	// git's environment; nil means os.Environ.
	Environ func() []string
	// Getwd is the workspace when GITHUB_WORKSPACE is unset; nil means os.Getwd.
	Getwd func() (string, error)
	// Stdout receives workflow commands (annotations, groups, masks); nil means os.Stdout.
	Stdout io.Writer
	// Stderr receives the runner's human logs and progress; nil means os.Stderr.
	Stderr io.Writer
	// Clock drives backoff sleeps and timestamps; nil means the real clock.
	Clock Clock
	// HTTPClient sends GitHub API and artifact-service requests; nil means a
	// client with a 2-minute timeout.
	HTTPClient *http.Client
	// BlobClient fetches artifact zips from storage (never given the
	// token); nil means a client with a 5-minute timeout.
	BlobClient *http.Client
	// RetrySleep is the artifact client's backoff sleeper; nil sleeps for real.
	RetrySleep ghaction.Sleeper
	// Engine, when set, wraps the engine the Action built (its every
	// dependency set) before it runs and redrives jobs with it; nil uses
	// that engine as it is.
	Engine func(*runner.Engine) Engine
	// Cancel is the time budget after the first signal (zero fields: the
	// defaults documented on CancelBudget).
	Cancel CancelBudget
}

func (d Deps) withDefaults() Deps {
	if d.Getenv == nil {
		d.Getenv = os.Getenv
	}
	if d.Environ == nil {
		d.Environ = os.Environ
	}
	if d.Getwd == nil {
		d.Getwd = os.Getwd
	}
	if d.Stdout == nil {
		d.Stdout = os.Stdout
	}
	if d.Stderr == nil {
		d.Stderr = os.Stderr
	}
	if d.HTTPClient == nil {
		d.HTTPClient = &http.Client{Timeout: 2 * time.Minute}
	}
	if d.BlobClient == nil {
		d.BlobClient = &http.Client{Timeout: 5 * time.Minute}
	}
	if d.Engine == nil {
		d.Engine = func(e *runner.Engine) Engine { return e }
	}
	d.Cancel = d.Cancel.withDefaults()
	return d
}

// Main runs the Action once and returns the process exit code: 0 the job
// completed, 1 it failed (or the push failed, or fail-on-dlq with DLQ items),
// 2 bad inputs or workflow (nothing was run), 130 interrupted.
func Main(ctx context.Context, d Deps) int {
	return newActionEnv(d.withDefaults()).run(ctx)
}

// defaultHome is ~/.prodigy.
func defaultHome(getenv func(string) string) (string, error) {
	h := getenv("HOME")
	if h == "" {
		var err error
		if h, err = os.UserHomeDir(); err != nil {
			return "", fmt.Errorf("cannot locate the state directory: set PRODIGY_HOME: %w", err)
		}
	}
	return filepath.Join(h, ".prodigy"), nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
