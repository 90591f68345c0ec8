package ghaction

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/google/go-github/v60/github"
)

// ErrForbidden is matched (errors.Is) by a PermissionError for HTTP 403:
// the token lacks a permission (fork pull requests always get a read-only
// token).
var ErrForbidden = errors.New("forbidden")

// ErrNotFound is matched by a PermissionError for HTTP 404, which GitHub
// also answers when the token may not see the resource.
var ErrNotFound = errors.New("not found")

// PermissionError is a 403 or 404 from the REST API, with a hint naming the
// workflow permission that is probably missing.
type PermissionError struct {
	// Op says what was attempted ("list artifacts of run 42").
	Op string
	// StatusCode is 403 or 404.
	StatusCode int
	// Permission is the `permissions:` entry the workflow needs ("actions: read").
	Permission string
	// Message is GitHub's message, if any.
	Message string
	err     error
}

func (e *PermissionError) Error() string {
	msg := fmt.Sprintf("%s: HTTP %d", e.Op, e.StatusCode)
	if e.Message != "" {
		msg += " (" + e.Message + ")"
	}
	return msg + fmt.Sprintf(": the token may lack `permissions: %s` (fork pull requests get a read-only token; other repositories need a PAT or app token)", e.Permission)
}

// Unwrap returns the underlying go-github error.
func (e *PermissionError) Unwrap() error { return e.err }

// Is matches ErrForbidden for 403 and ErrNotFound for 404.
func (e *PermissionError) Is(target error) bool {
	return (target == ErrForbidden && e.StatusCode == http.StatusForbidden) ||
		(target == ErrNotFound && e.StatusCode == http.StatusNotFound)
}

// classify turns a go-github error into a PermissionError for 403/404 and
// wraps everything else with op.
func classify(op, permission string, resp *github.Response, err error) error {
	status := 0
	if resp != nil {
		status = resp.StatusCode
	}
	var er *github.ErrorResponse
	msg := ""
	if errors.As(err, &er) {
		msg = er.Message
		if er.Response != nil {
			status = er.Response.StatusCode
		}
	}
	if status == http.StatusForbidden || status == http.StatusNotFound {
		var rl *github.RateLimitError
		var arl *github.AbuseRateLimitError
		if !errors.As(err, &rl) && !errors.As(err, &arl) {
			return &PermissionError{Op: op, StatusCode: status, Permission: permission, Message: msg, err: err}
		}
	}
	return fmt.Errorf("%s: %w", op, err)
}
