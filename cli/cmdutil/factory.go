// Package cmdutil holds what every command of the CLI shares (cli/cli's
// pkg/cmdutil): the Factory of side effects, the typed errors and the one
// mapping from errors to exit codes, flag helpers, confirmation prompts and
// JSON/file output.
package cmdutil

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"time"

	"github.com/prodigy-action/prodigy-action/actionapp"
	"github.com/prodigy-action/prodigy-action/config"
	"github.com/prodigy-action/prodigy-action/redact"
	"github.com/prodigy-action/prodigy-action/runner"
	"github.com/prodigy-action/prodigy-action/telemetry"
)

// Factory carries every side effect a command may use, so tests run the
// whole CLI in-process against temp dirs and buffers.
type Factory struct {
	In          io.Reader
	Out, ErrOut io.Writer
	Getenv      func(string) string
	// Now is the time for age cut-offs (dlq purge).
	Now func() time.Time
	// Engine is the engine every job command runs (NewFactory gives it
	// Stderr and Getenv, JobEngine the rest); tests put a fake clock there.
	Engine *runner.Engine
	// ActionMain runs the GitHub Action (no subcommand inside GitHub Actions).
	ActionMain func(context.Context, actionapp.Deps) int
	// Environ is the process environment whose secret-looking values are
	// redacted from every output (and the engine's base environment).
	Environ func() []string
	// BuildInfo is the build's module information for --version
	// (debug.ReadBuildInfo); ClaudeVersionFile overrides where the image
	// records its Claude Code version (ClaudeCodeVersionFile when empty).
	BuildInfo         func() (*debug.BuildInfo, bool)
	ClaudeVersionFile string

	red     *redact.Redactor   // built by Redactor
	tracing *telemetry.Tracing // built by Tracing; nil when off
	traced  bool               // Tracing ran
}

// Redactor returns the CLI's redactor over Environ (built once): every
// byte the CLI prints or exports passes it.
func (f *Factory) Redactor() *redact.Redactor {
	if f.red == nil {
		env := os.Environ
		if f.Environ != nil {
			env = f.Environ
		}
		// The OTLP export headers often hold a collector's API key.
		f.red = redact.New(redact.Config{Environ: env(), Values: telemetry.HeaderValues(f.Getenv)})
	}
	return f.red
}

// Tracing returns the OpenTelemetry tracing that Getenv's OTEL_*
// variables ask for (built once; nil when they ask for none). Its
// warnings (a collector that is down) go to ErrOut; ShutdownTracing
// flushes it.
func (f *Factory) Tracing() *telemetry.Tracing {
	if !f.traced {
		f.traced = true
		errOut := f.ErrOut
		f.tracing = telemetry.New(context.Background(), telemetry.Config{
			Getenv:   f.Getenv,
			Warn:     func(m string) { fmt.Fprintf(errOut, "WARN %s\n", m) },
			Redactor: f.Redactor(),
		})
	}
	return f.tracing
}

// ShutdownTracing flushes and stops the tracing, if any (bounded in
// time; a failure is a warning on ErrOut).
func (f *Factory) ShutdownTracing(ctx context.Context) {
	if f.tracing != nil {
		_ = f.tracing.Shutdown(context.WithoutCancel(ctx))
		f.tracing, f.traced = nil, false
	}
}

// NewFactory returns a Factory on the given streams and environment with
// the real clock and engine.
func NewFactory(in io.Reader, out, errOut io.Writer, getenv func(string) string) *Factory {
	return &Factory{In: in, Out: out, ErrOut: errOut, Getenv: getenv, Now: time.Now,
		Engine: &runner.Engine{Stderr: errOut, Getenv: getenv}, ActionMain: actionapp.Main, Environ: os.Environ,
		BuildInfo: readBuildInfo}
}

// Home returns the state directory: $PRODIGY_HOME, else ~/.prodigy.
func (f *Factory) Home() (string, error) {
	if h := f.Getenv("PRODIGY_HOME"); h != "" {
		return filepath.Abs(h)
	}
	h := f.Getenv("HOME")
	if h == "" {
		var err error
		if h, err = os.UserHomeDir(); err != nil {
			return "", UsageErrorf("cannot locate the state directory: set PRODIGY_HOME: %w", err)
		}
	}
	return filepath.Join(h, ".prodigy"), nil
}

// JobEngine returns the Factory's engine ready for a job (run, resume,
// demo, dlq retry, plan, shard, gather): the state directory (created; a
// directory that cannot be written is a usage error), stderr, the
// redactor and the tracer; the pool's files are deleted after the result
// is printed (FinishJob).
func (f *Factory) JobEngine() (*runner.Engine, error) {
	home, err := f.Home()
	if err != nil {
		return nil, err
	}
	if err := writableDir(home); err != nil {
		return nil, UsageErrorf("the state directory %s cannot be written (set PRODIGY_HOME to a writable directory): %w", home, err)
	}
	e := f.Engine
	e.Home = home
	e.Stderr = f.ErrOut
	e.Redactor = f.Redactor()
	e.Tracer = f.Tracing().Tracer()
	e.DeferTeardown = true
	return e, nil
}

// Agents is how a command's agents run: --max-parallel (0: the
// workflow's), --agent-user (default $PRODIGY_AGENT_USER) and the Claude
// flags.
func (f *Factory) Agents(maxParallel int, user string, claude config.ClaudeSettings) runner.Agents {
	if user == "" {
		user = f.Getenv("PRODIGY_AGENT_USER")
	}
	return runner.Agents{MaxParallel: maxParallel, User: user, Claude: claude}
}

// ParseIsolation checks --isolation: pool, fresh or "" (the default).
func ParseIsolation(s string) (runner.Isolation, error) {
	switch runner.Isolation(s) {
	case runner.IsolationPool, runner.IsolationFresh, "":
		return runner.Isolation(s), nil
	}
	return "", UsageErrorf("--isolation must be pool or fresh, not %q", s)
}

// ParseMerge checks --merge: tree, worktree or "" (the default).
func ParseMerge(s string) (runner.MergeMode, error) {
	switch runner.MergeMode(s) {
	case runner.MergeTree, runner.MergeWorktree, "":
		return runner.MergeMode(s), nil
	}
	return "", UsageErrorf("--merge must be tree or worktree, not %q", s)
}

// writableDir creates dir if needed and proves that files can be created
// in it (a read-only mount or a file in the way fails here, before a job
// changes anything).
func writableDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, ".write-check-*")
	if err != nil {
		return err
	}
	name := tmp.Name()
	_ = tmp.Close()
	return os.Remove(name)
}

// FinishJob prints a job's result (one JSON object on stdout with asJSON),
// then deletes the pool worktrees the job moved aside (Result.Teardown,
// off the result's path), and returns the job's error for ExitCode.
func (f *Factory) FinishJob(res *runner.Result, err error, asJSON bool) error {
	if asJSON && res != nil {
		if res.OrphanedWorktrees == nil {
			res.OrphanedWorktrees = []runner.OrphanedWorktree{}
		}
		if werr := WriteResultJSON(f.Out, res); werr != nil && err == nil {
			err = werr
		}
	}
	Teardown(res)
	return err
}

// Teardown runs res.Teardown, if any (see runner.Engine.DeferTeardown).
func Teardown(res *runner.Result) {
	if res != nil && res.Teardown != nil {
		res.Teardown()
	}
}

// WriteJSON writes v as indented JSON.
func WriteJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("write JSON: %w", err)
	}
	return nil
}
