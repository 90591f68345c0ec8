// Package clitest runs the command tree in-process for the CLI packages'
// tests: their streams in buffers, their environment a map, a fake clock
// (no real backoff sleeps) and, when set, a fixed time for age cut-offs.
// Only tests import it.
package clitest

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"time"

	"github.com/prodigy-action/prodigy-action/cli"
	"github.com/prodigy-action/prodigy-action/cli/cmdutil"
)

// Run is one in-process invocation of the CLI.
type Run struct {
	// Home, when set, is PRODIGY_HOME and HOME (an entry of Env for
	// either wins).
	Home string
	// Env is the environment the command sees (nothing else of the
	// process's): PRODIGY_HOME, HOME, …
	Env map[string]string
	// Stdin is the command's standard input.
	Stdin string
	// Now, when set, is the Factory's clock for age cut-offs (dlq purge).
	Now time.Time
	// Claude, when set, is the command claude steps run (the engine's
	// ClaudeCommand), e.g. a FakeClaude.
	Claude string
	// Setup, when set, changes the Factory last, just before the command
	// runs: its streams, build information, the engine's environment, or
	// its clock (nil is the real one, which sleeps).
	Setup func(*cmdutil.Factory)
}

// Exec runs args and returns the exit code, stdout and stderr.
func (r Run) Exec(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	f := cmdutil.NewFactory(strings.NewReader(r.Stdin), &out, &errb, r.getenv)
	f.Engine.Clock = &noSleep{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	if !r.Now.IsZero() {
		f.Now = func() time.Time { return r.Now }
	}
	if r.Claude != "" {
		f.Engine.ClaudeCommand = r.Claude
	}
	if r.Setup != nil {
		r.Setup(f)
	}
	code = cli.Execute(context.Background(), f, args)
	return code, out.String(), errb.String()
}

func (r Run) getenv(k string) string {
	if v, ok := r.Env[k]; ok {
		return v
	}
	if k == "PRODIGY_HOME" || k == "HOME" {
		return r.Home
	}
	return ""
}

// Home runs args with PRODIGY_HOME and HOME at home.
func Home(home string, args ...string) (int, string, string) {
	return Run{Home: home}.Exec(args...)
}

// noSleep is the engine's clock in these tests: Sleep returns at once and
// moves its time on, so backoffs take no time.
type noSleep struct {
	mu  sync.Mutex
	now time.Time
}

func (c *noSleep) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *noSleep) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	if d > 0 {
		c.now = c.now.Add(d)
	}
	c.mu.Unlock()
	return nil
}
