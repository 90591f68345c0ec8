package config

import (
	"errors"
	"fmt"
)

// Position is a place in a workflow file (1-based line and column).
type Position struct {
	File      string
	Line, Col int
}

// String returns "file:line:col" (or "file" when the line is unknown).
func (p Position) String() string {
	if p.Line <= 0 {
		return p.File
	}
	return fmt.Sprintf("%s:%d:%d", p.File, p.Line, p.Col)
}

// Error is one problem in a workflow file. Parse and Load return either a
// single *Error or several joined with errors.Join; use Errors to list them.
type Error struct {
	// Pos is where the problem is (the offending value, or the key).
	Pos Position
	// Key is the dotted path of the setting, such as
	// "map.error_policy.retry_config.initial_delay" or "setup[0].shell";
	// empty for YAML syntax errors.
	Key string
	// Msg says what is wrong and, where useful, what is accepted.
	Msg string
}

// Error returns "file:line:col: key: message".
func (e *Error) Error() string {
	if e.Key == "" {
		return fmt.Sprintf("%s: %s", e.Pos, e.Msg)
	}
	return fmt.Sprintf("%s: %s: %s", e.Pos, e.Key, e.Msg)
}

// Errors flattens an error returned by Parse or Load into its individual
// *Error values, in file order as reported. Errors that are not *Error
// (such as a failed read) are returned as is.
func Errors(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, Errors(e)...)
		}
		return out
	}
	var ce *Error
	if errors.As(err, &ce) {
		return []error{ce}
	}
	return []error{err}
}
