package jobcmd_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prodigy-action/prodigy-action/cli"
	"github.com/prodigy-action/prodigy-action/cli/cmdutil"
	"github.com/prodigy-action/prodigy-action/gitops/gitopstest"
	"github.com/prodigy-action/prodigy-action/retry/retrytest"
)

// cliRepo makes a git repository with the given files committed.
func cliRepo(t *testing.T, files map[string]string) string { return gitopstest.Repo(t, files) }

// runCLI runs the command tree in-process with PRODIGY_HOME and HOME at
// home and a fake clock (no real backoff sleeps).
func runCLI(t *testing.T, home string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	env := map[string]string{"PRODIGY_HOME": home, "HOME": home}
	f := cmdutil.NewFactory(strings.NewReader(""), &out, &errb, func(k string) string { return env[k] })
	f.Engine.Clock = retrytest.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	code := cli.Execute(context.Background(), f, args)
	return code, out.String(), errb.String()
}
