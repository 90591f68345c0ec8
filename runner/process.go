package runner

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// Causes attached to contexts so a killed process can be classified.
var (
	errStepTimeout  = errors.New("step timeout")
	errAgentTimeout = errors.New("agent timeout")
	errInterrupted  = errors.New("interrupted")
)

// procSpec describes one child process. It never runs through a shell
// unless Path is bash itself.
type procSpec struct {
	Path   string
	Args   []string
	Dir    string
	Env    []string
	Stdin  io.Reader
	Stdout io.Writer // receives stdout in addition to the captures
	Stderr io.Writer // receives stderr in addition to the captures
	// Grace is the time between SIGTERM and SIGKILL on cancellation.
	Grace time.Duration
}

// procResult is what happened to a child process.
type procResult struct {
	ExitCode int
	Stdout   []byte // up to maxCapture bytes of stdout
	Tail     []byte // the last tailSize bytes of stdout+stderr
	// Cause is non-nil when the context ended the process: errStepTimeout,
	// errAgentTimeout, errInterrupted or another context error.
	Cause error
	// StartErr is set when the process could not be started.
	StartErr error
}

const (
	maxCapture = 1 << 20
	tailSize   = 16 << 10
)

// runProcess starts the process in its own process group, and when ctx
// ends kills the whole group (SIGTERM, Grace, SIGKILL). Processes the step
// left running in the background are killed when it exits.
func runProcess(ctx context.Context, s procSpec) procResult {
	var res procResult
	stdout := &capBuffer{max: maxCapture}
	tail := &tailBuffer{max: tailSize}
	cmd := exec.Command(s.Path, s.Args...)
	cmd.Dir = s.Dir
	cmd.Env = s.Env
	cmd.Stdin = s.Stdin
	cmd.Stdout = multi(stdout, tail, s.Stdout)
	cmd.Stderr = multi(tail, s.Stderr)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = 2 * time.Second
	if err := cmd.Start(); err != nil {
		res.StartErr = err
		res.ExitCode = 127
		return res
	}
	pgid := cmd.Process.Pid
	done := make(chan struct{})
	killed := make(chan error, 1)
	go func() {
		select {
		case <-done:
			return
		case <-ctx.Done():
		}
		cause := context.Cause(ctx)
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		killed <- cause
		grace := s.Grace
		if grace <= 0 {
			grace = 5 * time.Second
		}
		t := time.NewTimer(grace)
		defer t.Stop()
		select {
		case <-done:
		case <-t.C:
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
		}
	}()
	err := cmd.Wait()
	close(done)
	// Reap anything the step left behind in its group.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	select {
	case cause := <-killed:
		res.Cause = cause
	default:
	}
	res.Stdout = stdout.Bytes()
	res.Tail = tail.Bytes()
	var exitErr *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exitErr):
		res.ExitCode = exitErr.ExitCode()
		if res.ExitCode < 0 {
			// Killed by a signal.
			if st, ok := exitErr.Sys().(syscall.WaitStatus); ok && st.Signaled() {
				res.ExitCode = 128 + int(st.Signal())
			} else {
				res.ExitCode = 1
			}
		}
	default:
		if res.ExitCode == 0 {
			res.ExitCode = 1
		}
		res.StartErr = err
	}
	return res
}

func multi(ws ...io.Writer) io.Writer {
	var out []io.Writer
	for _, w := range ws {
		if w != nil {
			out = append(out, w)
		}
	}
	return io.MultiWriter(out...)
}

// capBuffer keeps the first max bytes written to it.
type capBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
	max int
}

func (b *capBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if room := b.max - b.buf.Len(); room > 0 {
		if len(p) > room {
			b.buf.Write(p[:room])
		} else {
			b.buf.Write(p)
		}
	}
	return len(p), nil
}

func (b *capBuffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]byte(nil), b.buf.Bytes()...)
}

// tailBuffer keeps the last max bytes written to it; safe for concurrent use.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
	max int
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if over := len(b.buf) - b.max; over > 0 {
		b.buf = append(b.buf[:0], b.buf[over:]...)
	}
	return len(p), nil
}

func (b *tailBuffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]byte(nil), b.buf...)
}

func (b *tailBuffer) String() string { return string(b.Bytes()) }
