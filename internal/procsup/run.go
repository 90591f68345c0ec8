package procsup

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// Spec describes one child process. It never runs through a shell
// unless Path is bash itself.
type Spec struct {
	Path   string
	Args   []string
	Dir    string
	Env    []string  // nil: this process's environment; the process tag is added
	Stdout io.Writer // receives stdout in addition to the captures
	Stderr io.Writer // receives stderr in addition to the captures; notes about the process go here too
	// Grace is the time between SIGTERM and SIGKILL on cancellation
	// (default 5s).
	Grace time.Duration
	// User, if not nil, is the user the process runs as (the engine must
	// be root).
	User *Credential
	// OutputGrace is how long output is still read after the process
	// exited, while background processes it started hold its stdout or
	// stderr (default defaultOutputGrace). Later output is dropped.
	OutputGrace time.Duration
}

// Result is what happened to a child process.
type Result struct {
	ExitCode int
	Stdout   []byte // up to maxCapture bytes of stdout
	Tail     []byte // the last tailSize bytes of stdout+stderr
	// Cause is non-nil when the context ended before the process did: the
	// context's cause (context.Cause: the engine's step or agent timeout,
	// its interrupt, or a plain context error). It is decided by whether the context fired, never by the exit
	// status, so a step killed by its timeout is a timeout whatever it
	// exited with.
	Cause error
	// StartErr is set when (and only when) the process could not be started.
	StartErr error
}

// TailSize is how much of a process's last output Result.Tail keeps.
const TailSize = 16 << 10

// DefaultKillGrace is the time between SIGTERM and SIGKILL when
// Spec.Grace is 0.
const DefaultKillGrace = 5 * time.Second

const (
	maxCapture = 1 << 20

	defaultOutputGrace = time.Second
	// groupEndLimit bounds how long ending a step's processes may take
	// before the runner gives up on the stragglers (and says so).
	groupEndLimit = 10 * time.Second
)

// Run runs a step's process in its own process group and returns
// when that process has exited: its exit is the step's end.
//
//   - When ctx ends first, the whole group gets SIGTERM, then SIGKILL after
//     Grace; the result's Cause says why.
//   - Output written after the process exited is still read for
//     OutputGrace; if background processes hold stdout or stderr longer,
//     the rest is dropped and a note goes to Stderr.
//   - Every process the step started is then ended: its group and, where
//     the platform allows (see table_linux.go), descendants that left the
//     group with setsid. None outlives the step.
func Run(ctx context.Context, s Spec) Result {
	var res Result
	stdout := &capBuffer{max: maxCapture}
	tail := NewTailBuffer(TailSize)
	rec := recorderFrom(ctx)
	g := procs.newGroup(rec)

	outR, outW, err := os.Pipe()
	if err != nil {
		return startFailed(fmt.Errorf("create stdout pipe: %w", err))
	}
	defer outR.Close()
	errR, errW, err := os.Pipe()
	if err != nil {
		outW.Close()
		return startFailed(fmt.Errorf("create stderr pipe: %w", err))
	}
	defer errR.Close()

	cmd := exec.Command(s.Path, s.Args...)
	cmd.Dir = s.Dir
	env := s.Env
	if env == nil {
		env = os.Environ() // as exec does for a nil Env
	}
	cmd.Env = append(env[:len(env):len(env)], TagEnv+"="+g.tag)
	// The pipes are passed as files, so Wait returns when the process
	// exits, not when every holder of the pipes has closed them.
	cmd.Stdout = outW
	cmd.Stderr = errW
	cmd.SysProcAttr = stepSysProcAttr()
	setCredential(cmd.SysProcAttr, s.User)
	err = procs.start(cmd, g)
	outW.Close()
	errW.Close()
	if err != nil {
		return startFailed(err)
	}
	if err := recordStarted(rec, g); err != nil && s.Stderr != nil {
		fmt.Fprintf(s.Stderr, "--- note: could not record the step's process group for resume: %v\n", err)
	}

	var copies sync.WaitGroup
	copies.Add(2)
	go func() { defer copies.Done(); _, _ = io.Copy(multi(stdout, tail, s.Stdout), outR) }()
	go func() { defer copies.Done(); _, _ = io.Copy(multi(tail, s.Stderr), errR) }()
	copied := make(chan struct{})
	go func() { copies.Wait(); close(copied) }()

	k := &killer{pgid: g.pgid, grace: s.Grace, done: make(chan struct{})}
	go k.watch(ctx)
	waitErr := cmd.Wait()
	res.Cause = k.finish()
	exitCode, sysErr := exitStatus(waitErr)
	res.ExitCode = exitCode
	if res.Cause == nil && exitCode != 0 && ctx.Err() != nil {
		// The context fired and the process ended before the killer got to
		// it: the deadline decides, not the exit code.
		res.Cause = context.Cause(ctx)
	}

	grace := s.OutputGrace
	if grace <= 0 {
		grace = defaultOutputGrace
	}
	dropped := false
	t := time.NewTimer(grace)
	select {
	case <-copied:
	case <-t.C:
		dropped = true
		outR.Close()
		errR.Close()
		<-copied
	}
	t.Stop()
	endErr := procs.end(g, groupEndLimit)
	if endErr == nil {
		if err := recordEnded(rec, g); err != nil && s.Stderr != nil {
			fmt.Fprintf(s.Stderr, "--- note: could not record the end of the step's process group: %v\n", err)
		}
	}
	if s.Stderr != nil {
		if dropped {
			fmt.Fprintf(s.Stderr, "--- note: the step's process exited, but processes it left in the background still held its output after %s; later output was dropped and they were ended\n", grace)
		}
		if sysErr != nil {
			fmt.Fprintf(s.Stderr, "--- note: waiting for the step's process: %v\n", sysErr)
		}
		if endErr != nil {
			fmt.Fprintf(s.Stderr, "--- note: %v\n", endErr)
		}
	}
	res.Stdout = stdout.Bytes()
	res.Tail = tail.Bytes()
	return res
}

func startFailed(err error) Result {
	return Result{ExitCode: 127, StartErr: err}
}

// exitStatus maps the error of cmd.Wait to an exit code: a process killed
// by a signal is 128+signal, as shells report it. sysErr is an error that
// is not about the process's exit (it then counts as exit code 1).
func exitStatus(err error) (code int, sysErr error) {
	if err == nil {
		return 0, nil
	}
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) {
		return 1, err
	}
	if st, ok := exitErr.Sys().(syscall.WaitStatus); ok && st.Signaled() {
		return 128 + int(st.Signal()), nil
	}
	if c := exitErr.ExitCode(); c >= 0 {
		return c, nil
	}
	return 1, nil
}

// killer ends a step's process group when the step's context ends first.
type killer struct {
	pgid  int
	grace time.Duration

	mu       sync.Mutex
	finished bool          // the process has exited; never signal its group again
	cause    error         // set before the first signal is sent
	done     chan struct{} // closed by finish
}

// watch waits for ctx to end or the process to exit. The cause is
// recorded before the group is signalled, so finish can never observe a
// process killed by the deadline without its cause.
func (k *killer) watch(ctx context.Context) {
	select {
	case <-k.done:
		return
	case <-ctx.Done():
	}
	k.mu.Lock()
	if k.finished {
		k.mu.Unlock()
		return
	}
	k.cause = context.Cause(ctx)
	k.mu.Unlock()
	_ = syscall.Kill(-k.pgid, syscall.SIGTERM)
	grace := k.grace
	if grace <= 0 {
		grace = DefaultKillGrace
	}
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-k.done:
	case <-t.C:
		_ = syscall.Kill(-k.pgid, syscall.SIGKILL)
	}
}

// finish is called once the process has exited; it returns the cause when
// the context ended the process.
func (k *killer) finish() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.finished = true
	close(k.done)
	return k.cause
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

// TailBuffer keeps the last max bytes written to it; safe for concurrent
// use.
type TailBuffer struct {
	mu  sync.Mutex
	buf []byte
	max int
}

// NewTailBuffer returns a TailBuffer keeping the last max bytes.
func NewTailBuffer(max int) *TailBuffer { return &TailBuffer{max: max} }

// Write keeps the last max bytes of what was written so far.
func (b *TailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if over := len(b.buf) - b.max; over > 0 {
		b.buf = append(b.buf[:0], b.buf[over:]...)
	}
	return len(p), nil
}

// Bytes returns a copy of what the buffer holds.
func (b *TailBuffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]byte(nil), b.buf...)
}

// String returns what the buffer holds.
func (b *TailBuffer) String() string { return string(b.Bytes()) }

// Credential is a user a process runs as (the engine must be root).
type Credential struct {
	UID, GID int
}

// setCredential makes a process run as c (nil: as the engine), with no
// supplementary groups.
func setCredential(a *syscall.SysProcAttr, c *Credential) {
	if c != nil {
		a.Credential = &syscall.Credential{Uid: uint32(c.UID), Gid: uint32(c.GID), Groups: []uint32{}}
	}
}

// SysProcAttr is what a step's process starts with: its own process group,
// killed when the engine dies (Linux), running as c (nil: as the engine).
// For processes started outside Run that must be ended like steps.
func SysProcAttr(c *Credential) *syscall.SysProcAttr {
	a := stepSysProcAttr()
	setCredential(a, c)
	return a
}
