package items

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// DefaultTimeout bounds an input command when Options.Timeout is 0.
const DefaultTimeout = 300 * time.Second

// CommandError reports an input command that failed, timed out or could not
// start. Stderr holds the tail of its standard error.
type CommandError struct {
	Command  string
	Dir      string
	ExitCode int // -1 when the process did not exit normally
	TimedOut bool
	Timeout  time.Duration
	Stderr   string
	Err      error
}

// Error implements error.
func (e *CommandError) Error() string {
	var b strings.Builder
	switch {
	case e.TimedOut:
		fmt.Fprintf(&b, "input command %q timed out after %s (its process group was killed)", e.Command, e.Timeout)
	case e.ExitCode >= 0:
		fmt.Fprintf(&b, "input command %q failed with exit code %d", e.Command, e.ExitCode)
	default:
		fmt.Fprintf(&b, "input command %q failed: %v", e.Command, e.Err)
	}
	if e.ExitCode == 127 {
		fmt.Fprintf(&b, " (command not found; input is run as a command because no file %q exists)",
			filepath.Join(e.Dir, e.Command))
	}
	if s := strings.TrimSpace(e.Stderr); s != "" {
		fmt.Fprintf(&b, "; stderr: %s", s)
	}
	return b.String()
}

// Unwrap returns the underlying exec error.
func (e *CommandError) Unwrap() error { return e.Err }

// stderrTail is how much of a failing command's stderr errors carry.
const stderrTail = 2048

// source is the raw input: a file's bytes or a command's stdout.
type source struct {
	data      []byte
	fromFile  string // path when the input was a file
	isCommand bool
}

// readInput reads o.Input as a file if one exists (after expanding $VAR and
// ${VAR} from the environment), else runs it as a command.
func readInput(ctx context.Context, o Options) (source, error) {
	in := strings.TrimSpace(o.Input)
	if in == "" {
		return source{}, errors.New("input is empty: set map.input to a JSON file or a command")
	}
	path := resolvePath(o.Dir, os.Expand(in, envLookup(o.Env)))
	if st, err := os.Stat(path); err == nil {
		if st.IsDir() {
			return source{}, fmt.Errorf("input %q is a directory, not a JSON file", path)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return source{}, fmt.Errorf("failed to read input file: %w", err)
		}
		return source{data: data, fromFile: path}, nil
	}
	if looksLikeFile(in) {
		return source{}, fmt.Errorf("input file %q does not exist", path)
	}
	out, err := runInputCommand(ctx, in, o)
	if err != nil {
		return source{}, err
	}
	return source{data: out, isCommand: true}, nil
}

// looksLikeFile reports whether a missing input is surely meant as a file:
// one word naming a .json/.jsonl file. Anything else is run as a command.
func looksLikeFile(in string) bool {
	if strings.ContainsAny(in, " \t\n|;&<>()$`'\"") {
		return false
	}
	ext := strings.ToLower(filepath.Ext(in))
	return ext == ".json" || ext == ".jsonl"
}

func resolvePath(dir, p string) string {
	if filepath.IsAbs(p) || dir == "" {
		return p
	}
	return filepath.Join(dir, p)
}

func envLookup(env []string) func(string) string {
	if env == nil {
		return os.Getenv
	}
	return func(name string) string {
		for i := len(env) - 1; i >= 0; i-- {
			if k, v, ok := strings.Cut(env[i], "="); ok && k == name {
				return v
			}
		}
		return ""
	}
}

// runInputCommand runs command with `bash -c` in o.Dir and returns stdout.
// On timeout the whole process group is killed.
func runInputCommand(ctx context.Context, command string, o Options) ([]byte, error) {
	timeout := o.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", command)
	cmd.Dir = o.Dir
	cmd.Env = o.Env
	var stdout bytes.Buffer
	stderr := &tailBuffer{max: stderrTail}
	cmd.Stdout = &stdout
	cmd.Stderr = stderr
	setProcessGroup(cmd)
	cmd.WaitDelay = 2 * time.Second
	err := cmd.Run()
	if err == nil {
		return stdout.Bytes(), nil
	}
	ce := &CommandError{Command: command, Dir: o.Dir, ExitCode: -1, Stderr: stderr.String(), Err: err}
	if ctx.Err() != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			ce.TimedOut, ce.Timeout = true, timeout
		} else {
			ce.Err = ctx.Err()
		}
		return nil, ce
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.Exited() {
		ce.ExitCode = ee.ExitCode()
	}
	return nil, ce
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	max int
	buf []byte
	cut bool
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
		t.cut = true
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	if t.cut {
		return "…" + string(t.buf)
	}
	return string(t.buf)
}

// parseInput decodes src into the root value the JSONPath applies to.
// Whole-document JSON wins; command output that is not one JSON document is
// read as one item per non-empty line: the line's JSON value if it parses,
// else the line itself as a string. A file must be one JSON document.
func parseInput(src source) (any, error) {
	v, err := decodeJSON(src.data)
	if err == nil {
		return v, nil
	}
	if !src.isCommand {
		return nil, fmt.Errorf("input file %q is not valid JSON: %w", src.fromFile, err)
	}
	if len(bytes.TrimSpace(src.data)) == 0 {
		return []any{}, nil
	}
	var lines []any
	sc := bufio.NewScanner(bytes.NewReader(src.data))
	sc.Buffer(make([]byte, 64*1024), 64*1024*1024)
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		if strings.TrimSpace(line) == "" {
			continue
		}
		if v, err := decodeJSON([]byte(line)); err == nil {
			lines = append(lines, v)
		} else {
			lines = append(lines, line)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("failed to read input command output: %w", err)
	}
	return lines, nil
}

// decodeJSON decodes exactly one JSON value (numbers as json.Number). The
// error locates syntax errors by line and column.
func decodeJSON(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("it is empty")
		}
		return nil, locateJSONError(data, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		line, col := lineCol(data, int(dec.InputOffset()))
		return nil, fmt.Errorf("unexpected data after the first JSON value at line %d, column %d", line, col)
	}
	return v, nil
}

func locateJSONError(data []byte, err error) error {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		line, col := lineCol(data, int(se.Offset))
		return fmt.Errorf("%w (line %d, column %d)", err, line, col)
	}
	return err
}

func lineCol(data []byte, off int) (int, int) {
	off = min(max(off, 0), len(data))
	before := data[:off]
	line := bytes.Count(before, []byte("\n")) + 1
	col := off - bytes.LastIndexByte(before, '\n')
	return line, col
}
