//go:build linux

package step

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prodigy-action/prodigy-action/dlq"
	"github.com/prodigy-action/prodigy-action/internal/procsup"
	"github.com/prodigy-action/prodigy-action/internal/proctest"
)

func TestTimeoutIsTimeoutWhateverTheExitStatus(t *testing.T) {
	bash := proctest.Bash(t)
	scripts := map[string]string{
		"killed by SIGTERM (exit 143)": "sleep 30",
		"traps TERM and exits 0":       "trap 'exit 0' TERM; sleep 30 & wait",
		"traps TERM and exits 1":       "trap 'exit 1' TERM; sleep 30 & wait",
	}
	for name, script := range scripts {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			// Many short timeouts at once: the kill races the exit every time.
			var wg sync.WaitGroup
			errs := make(chan string, 40)
			for i := range 20 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					timeout := time.Duration(1+i%5) * 20 * time.Millisecond
					ctx, cancel := context.WithTimeoutCause(context.Background(), timeout, ErrStepTimeout)
					defer cancel()
					res := procsup.Run(ctx, procsup.Spec{Path: bash, Args: []string{"-c", script}, Grace: time.Second})
					f := processFailure("shell step 1", res, timeout)
					if f == nil || f.Type.Kind != dlq.Timeout {
						errs <- fmt.Sprintf("exit %d cause %v: %+v", res.ExitCode, res.Cause, f)
					}
				}()
			}
			wg.Wait()
			close(errs)
			for e := range errs {
				t.Error(e)
			}
		})
	}
}

func TestProcessExitIsStepEndWithBackgroundChildHoldingOutput(t *testing.T) {
	t.Parallel()
	bash := proctest.Bash(t)
	var log bytes.Buffer
	res := procsup.Run(context.Background(), procsup.Spec{
		Path: bash, Args: []string{"-c", `sleep 300 & echo "bg=$!"; echo done`},
		Stderr: &log, OutputGrace: 200 * time.Millisecond,
	})
	if res.StartErr != nil || res.ExitCode != 0 || res.Cause != nil {
		t.Fatalf("result = %+v", res)
	}
	if f := processFailure("shell step 1", res, 0); f != nil {
		t.Fatalf("failure = %+v", f)
	}
	out := string(res.Stdout)
	if !strings.Contains(out, "done") {
		t.Fatalf("stdout = %q", out)
	}
	if !strings.Contains(log.String(), "later output was dropped") {
		t.Fatalf("no note in the log: %q", log.String())
	}
	pid, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(strings.Split(out, "\n")[0], "bg=")))
	if err != nil {
		t.Fatalf("stdout = %q", out)
	}
	proctest.WaitGone(t, "the background child", pid)
}

func TestCouldNotRunOnlyWhenTheProcessCannotStart(t *testing.T) {
	t.Parallel()
	res := procsup.Run(context.Background(), procsup.Spec{Path: filepath.Join(t.TempDir(), "missing")})
	f := processFailure("shell step 1", res, 0)
	if res.StartErr == nil || f == nil || !strings.Contains(f.Message, "could not run") {
		t.Fatalf("missing binary: %+v %+v", res, f)
	}
	res = procsup.Run(context.Background(), procsup.Spec{Path: proctest.Bash(t), Args: []string{"-c", "exit 3"}})
	f = processFailure("shell step 1", res, 0)
	if res.StartErr != nil || f == nil || f.Type.Kind != dlq.CommandFailed || f.Type.ExitCode != 3 || strings.Contains(f.Message, "could not run") {
		t.Fatalf("exit 3: %+v %+v", res, f)
	}
}
