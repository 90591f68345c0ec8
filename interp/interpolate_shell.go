package interp

import (
	"errors"
	"fmt"
	"strings"
)

// InterpolateShell returns a bash script in which every placeholder is
// replaced by a reference to an environment variable that carries its
// rendered value, so bash sees the value literally whatever quoting
// surrounds the placeholder; env lists the NAME=value pairs to add to the
// process environment. Item data is therefore never parsed as shell code.
//
// The reference depends on the context bash reads the placeholder in,
// found in the script's syntax tree (bash's grammar, mvdan.cc/sh; see
// shellRewrite):
//   - unquoted (also inside $( ), <( ), backticks, a here-string's word
//     after <<<, and unquoted ${x:-…}): "${__PRODIGY_V_n}";
//   - inside "…" and in unquoted here-documents: ${__PRODIGY_V_n};
//   - inside '…': '"${__PRODIGY_V_n}"' (close, insert, reopen), and
//     likewise for $'…';
//   - inside $(( )), (( )) and a for (( )) loop's header: the value itself,
//     which must be an integer (bash evaluates arithmetic operands as code,
//     so anything else is an error);
//   - inside a quoted here-document (<<'EOF'): an error, because bash
//     expands nothing there;
//   - in a comment, or after a backslash that makes its $ literal: left as
//     written.
//
// Which ${…} are placeholders: names that resolve in vars, names whose first
// segment is a variable or one of item, item_id, item_index, item_total,
// attempt, map, shell, and any dotted path — these must resolve
// (or carry a :-default) or the call fails naming the placeholder. Other
// plain names (${HOME}, ${arr[0]}) and bash forms such as ${#x} or
// ${x//a/b} are left to bash. $${ becomes ${ for bash to expand (not in
// comments); a backslash-escaped \${ is left as written, as bash prints it
// literally. A script with placeholders must parse as bash.
//
// Then every reference is checked against the contexts where bash
// evaluates a value (see CheckShell): there the value must be a plain
// integer, and inside the script of a second shell the placeholder is
// refused unless opts.AllowNestedShell is set.
func InterpolateShell(s string, vars Vars, opts ShellOptions) (script string, env []string, err error) {
	opts.MaxEnvValue = -1
	p, err := PrepareShell(s, vars, opts)
	return p.Script, p.Env, err
}

// DefaultMaxEnvValue is the largest value PrepareShell passes in an
// environment variable (Linux refuses a single environment string over
// 128 KiB, and all of them share the argument space).
const DefaultMaxEnvValue = 32 << 10

// ShellScript is a prepared shell step.
type ShellScript struct {
	// Script is the bash script to run with bash -c.
	Script string
	// Env lists NAME=value pairs to add to the process environment.
	Env []string
	// Files are values too large for the environment: the caller writes
	// each Content to a file and adds EnvName=<path> to the environment;
	// the script reads the file into its variable before anything else.
	Files []ValueFile
}

// ValueFile is one value passed through a file.
type ValueFile struct {
	EnvName string
	Content string
}

// PrepareShell is InterpolateShell for values of any size: values longer
// than opts.MaxEnvValue (0 = DefaultMaxEnvValue, negative = no limit) are
// passed through files (see ShellScript.Files) and read by a prelude put
// on the script's first line, so line numbers are unchanged.
func PrepareShell(s string, vars Vars, opts ShellOptions) (ShellScript, error) {
	sc := newShellRewrite(s, vars, false)
	if err := sc.run(); err != nil {
		var se *ScriptError
		if errors.As(err, &se) {
			return ShellScript{}, err
		}
		return ShellScript{}, fmt.Errorf("shell script: %w", err)
	}
	script := sc.out.String()
	if len(sc.refs) > 0 {
		uses, err := analyseShell(script, sc.refs)
		if err != nil {
			return ShellScript{}, fmt.Errorf("shell script: %w", err)
		}
		for _, u := range uses {
			if err := u.check(sc.values[u.ref.name], opts); err != nil {
				se := asScriptError(err)
				se.Line, se.Col = lineColAt(s, u.ref.src)
				return ShellScript{}, se
			}
		}
	}
	limit := opts.MaxEnvValue
	if limit == 0 {
		limit = DefaultMaxEnvValue
	}
	out := ShellScript{Script: script}
	var prelude strings.Builder
	for _, kv := range sc.env {
		name, val, _ := strings.Cut(kv, "=")
		if limit < 0 || len(val) <= limit {
			out.Env = append(out.Env, kv)
			continue
		}
		file := strings.Replace(name, "_V_", "_F_", 1)
		out.Files = append(out.Files, ValueFile{EnvName: file, Content: val})
		// read -d '' keeps every byte (trailing newlines included) up to
		// the end of the file; values never hold NUL.
		fmt.Fprintf(&prelude, `IFS= read -r -d '' %s < "$%s"; `, name, file)
	}
	if prelude.Len() > 0 {
		out.Script = prelude.String() + script
	}
	return out, nil
}

// ScriptError is a problem at a place in a step's text (1-based line and
// byte column within the text).
type ScriptError struct {
	Line, Col int
	Err       error
}

func (e *ScriptError) Error() string { return fmt.Sprintf("shell script line %d: %v", e.Line, e.Err) }
func (e *ScriptError) Unwrap() error { return e.Err }

// lineColAt returns the 1-based line and column of offset i in s.
func lineColAt(s string, i int) (line, col int) {
	i = min(max(i, 0), len(s))
	line = strings.Count(s[:i], "\n") + 1
	return line, i - (strings.LastIndexByte(s[:i], '\n') + 1) + 1
}
