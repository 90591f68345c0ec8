package retry

import (
	"context"
	"errors"
	"net"
	"regexp"
	"strings"
)

// Matcher kinds accepted in Matcher.Kind (the retry_on entries of the seed).
const (
	MatchNetwork     = "network"
	MatchTimeout     = "timeout"
	MatchServerError = "server_error"
	MatchRateLimit   = "rate_limit"
	MatchPattern     = "pattern"
)

// Matcher selects retryable errors (one retry_on entry). The kinds follow
// Prodigy's ErrorMatcher (prodigy-internals §4.4), matched case-insensitively
// against err.Error():
//
//   - network: "network", "connection", "refused", "unreachable", or an
//     error chain holding a *net.OpError or *net.DNSError;
//   - timeout: "timeout", "timed out", or a chain holding
//     context.DeadlineExceeded or a net.Error whose Timeout() is true;
//   - server_error: "server error" or the status codes 500, 502, 503, 504
//     as whole numbers (so "processed 1500 files" does not match);
//   - rate_limit: "rate limit", "rate-limit", "ratelimit", "too many
//     requests" or the whole number 429;
//   - pattern: Pattern matches err.Error() (a nil Pattern never matches).
//
// An unknown Kind and a nil error never match.
type Matcher struct {
	Kind    string
	Pattern *regexp.Regexp
}

var (
	serverCodes = regexp.MustCompile(`(^|[^0-9])50[0234]([^0-9]|$)`)
	rateCode    = regexp.MustCompile(`(^|[^0-9])429([^0-9]|$)`)
)

// Matches reports whether err is retryable under m.
func (m Matcher) Matches(err error) bool {
	if err == nil {
		return false
	}
	msg := strings.ToLower(err.Error())
	switch m.Kind {
	case MatchNetwork:
		return isNetwork(err) || containsAny(msg, "network", "connection", "refused", "unreachable")
	case MatchTimeout:
		return isTimeout(err) || containsAny(msg, "timeout", "timed out")
	case MatchServerError:
		return strings.Contains(msg, "server error") || serverCodes.MatchString(msg)
	case MatchRateLimit:
		return containsAny(msg, "rate limit", "rate-limit", "ratelimit", "too many requests") || rateCode.MatchString(msg)
	case MatchPattern:
		return m.Pattern != nil && m.Pattern.MatchString(err.Error())
	}
	return false
}

func containsAny(s string, subs ...string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

func isNetwork(err error) bool {
	var op *net.OpError
	var dns *net.DNSError
	return errors.As(err, &op) || errors.As(err, &dns)
}

func isTimeout(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// retryable reports whether err may be retried under p: not Permanent, and
// matched by some RetryOn entry (or RetryOn is empty).
func (p Policy) retryable(err error) bool {
	if IsPermanent(err) {
		return false
	}
	if len(p.RetryOn) == 0 {
		return true
	}
	for _, m := range p.RetryOn {
		if m.Matches(err) {
			return true
		}
	}
	return false
}
