package ghaction

import (
	"errors"
	"fmt"
	"net/http"
	"time"

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

// ErrRateLimited is matched by the error of a call refused because the
// token's primary rate limit is used up; the message says when it resets.
var ErrRateLimited = errors.New("GitHub API rate limit exhausted")

// classify turns a go-github error into a PermissionError for 403/404, an
// ErrRateLimited error naming the reset time for a primary rate limit, and
// wraps everything else with op.
func classify(op, permission string, resp *github.Response, err error) error {
	if reset, ok := primaryReset(resp, err); ok {
		return fmt.Errorf("%s: %w; it resets at %s: %w", op, ErrRateLimited, reset.UTC().Format(time.RFC3339), err)
	}
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

// primaryReset returns the reset time of a primary rate limit: go-github's
// RateLimitError (403, or its own refusal before sending), or any other
// error response with x-ratelimit-remaining: 0 (e.g. 429).
func primaryReset(resp *github.Response, err error) (time.Time, bool) {
	var rl *github.RateLimitError
	if errors.As(err, &rl) && !rl.Rate.Reset.Time.IsZero() {
		return rl.Rate.Reset.Time, true
	}
	if resp == nil || resp.Response == nil || !primaryLimit(resp.Response) {
		return time.Time{}, false
	}
	return rateReset(resp.Response)
}
