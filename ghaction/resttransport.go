package ghaction

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prodigy-action/prodigy-action/retry"
)

// RESTRetry configures the retrying transport of the GitHub REST client.
// The zero value is the production setting.
type RESTRetry struct {
	// Attempts is the total number of tries of one request; < 1 means 5.
	Attempts int
	// Base is the wait before the first retry when the server gives no
	// hint; 0 means 2s (×2 per retry).
	Base time.Duration
	// Budget bounds the total wait of one request; 0 means 3 minutes. A
	// server hint (Retry-After, x-ratelimit-reset) beyond the budget is not
	// waited for: the response is returned as is.
	Budget time.Duration
	// Clock sleeps between tries and tells the time for x-ratelimit-reset;
	// nil means retry.SystemClock.
	Clock retry.Clock
	// OnRetry, when set, is told about every retry before the wait.
	OnRetry func(method, url string, status int, err error, wait time.Duration)
}

func (o RESTRetry) withDefaults() RESTRetry {
	if o.Attempts < 1 {
		o.Attempts = 5
	}
	if o.Base <= 0 {
		o.Base = 2 * time.Second
	}
	if o.Budget <= 0 {
		o.Budget = 3 * time.Minute
	}
	if o.Clock == nil {
		o.Clock = retry.SystemClock
	}
	return o
}

// secondaryMinWait is GitHub's documented wait before retrying a secondary
// rate limit that carries no Retry-After or reset header.
const secondaryMinWait = time.Minute

// maxBufferedErrorBody bounds how much of a retryable error response is
// kept in memory (it is handed to the caller after the last try).
const maxBufferedErrorBody = 1 << 20

// WithRetry returns a copy of c (nil: a default client) whose transport
// retries what GitHub documents as transient: 429, 403 secondary (and
// primary, when the reset is within the budget) rate limits, 500, 502, 503,
// 504 and transport errors. It waits Retry-After when present, until
// x-ratelimit-reset when x-ratelimit-remaining is 0, at least a minute for
// a secondary limit without either, and exponential backoff otherwise,
// within o.Budget in total. When it gives up on a response it returns that
// response unchanged (so go-github still builds its typed errors); when it
// gives up on a transport error it returns that error. Requests whose body
// cannot be replayed (no GetBody) are sent once. c.Timeout, if any, is
// raised by the budget since it covers every try.
func WithRetry(c *http.Client, o RESTRetry) *http.Client {
	var cp http.Client
	if c != nil {
		cp = *c
	}
	o = o.withDefaults()
	cp.Transport = &retryTransport{base: cp.Transport, o: o}
	if cp.Timeout > 0 {
		cp.Timeout += o.Budget
	}
	return &cp
}

type retryTransport struct {
	base http.RoundTripper
	o    RESTRetry
}

// retryStatus marks a response worth retrying, carrying the server's hint.
type retryStatus struct {
	status int
	hint   time.Duration
	// tooLong: the hint exceeds the budget, so do not wait at all.
	tooLong bool
}

func (e *retryStatus) Error() string { return "HTTP " + strconv.Itoa(e.status) }

func (t *retryTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	base := t.base
	if base == nil {
		base = http.DefaultTransport
	}
	if req.Body != nil && req.Body != http.NoBody && req.GetBody == nil {
		return base.RoundTrip(req)
	}
	ctx := req.Context()
	var (
		last *http.Response
		hint time.Duration
	)
	p := retry.Policy{
		Attempts: t.o.Attempts,
		Budget:   t.o.Budget,
		// The server's hint wins over our own schedule.
		Backoff: retry.BackoffFunc(func(k int) time.Duration {
			if hint > 0 {
				return hint
			}
			return retry.Exponential(t.o.Base, 2).Delay(k)
		}),
	}
	opts := retry.Options{Clock: t.o.Clock, OnAttempt: func(a retry.Attempt) {
		if a.Final || t.o.OnRetry == nil {
			return
		}
		status := 0
		var rs *retryStatus
		if errors.As(a.Err, &rs) {
			status = rs.status
		}
		t.o.OnRetry(req.Method, req.URL.Redacted(), status, a.Err, a.Delay)
	}}
	err := retry.Do(ctx, p, opts, func(ctx context.Context, attempt int) error {
		hint = 0
		r := req
		if attempt > 1 {
			r = req.Clone(ctx)
			if req.GetBody != nil {
				body, err := req.GetBody()
				if err != nil {
					return retry.Permanent(fmt.Errorf("replay request body: %w", err))
				}
				r.Body = body
			}
		}
		resp, err := base.RoundTrip(r)
		if err != nil {
			last = nil
			if ctx.Err() != nil || !isTransportError(err) {
				return retry.Permanent(err)
			}
			return err
		}
		rs := t.classify(resp)
		if rs == nil {
			last = resp
			return nil
		}
		// Keep the body so the last response can be handed back intact.
		data, _ := io.ReadAll(io.LimitReader(resp.Body, maxBufferedErrorBody))
		resp.Body.Close()
		resp.Body = io.NopCloser(bytes.NewReader(data))
		if rs.status == http.StatusForbidden && !secondaryLimit(resp, data) && !primaryLimit(resp) {
			last = resp
			return nil // a plain permission error
		}
		if rs.status == http.StatusForbidden && rs.hint == 0 && !primaryLimit(resp) {
			rs.hint = secondaryMinWait
		}
		last = resp
		if rs.tooLong || rs.hint > t.o.Budget {
			return retry.Permanent(rs)
		}
		hint = rs.hint
		return rs
	})
	var rs *retryStatus
	switch {
	case err == nil:
		return last, nil
	case errors.As(err, &rs) && last != nil:
		// Attempts or budget used up: the caller sees GitHub's answer.
		return last, nil
	default:
		return nil, err
	}
}

// classify returns a retryStatus for responses worth retrying, nil
// otherwise. 403 is returned as a candidate; RoundTrip decides with the
// body whether it is a rate limit.
func (t *retryTransport) classify(resp *http.Response) *retryStatus {
	code := resp.StatusCode
	if code != http.StatusForbidden && !retryableStatus(code) {
		return nil
	}
	rs := &retryStatus{status: code}
	if ra := resp.Header.Get("Retry-After"); ra != "" {
		if secs, err := strconv.Atoi(strings.TrimSpace(ra)); err == nil && secs >= 0 {
			rs.hint = time.Duration(secs) * time.Second
		} else if at, err := http.ParseTime(ra); err == nil {
			rs.hint = max(at.Sub(t.o.Clock.Now()), 0)
		}
	} else if primaryLimit(resp) {
		if reset, ok := rateReset(resp); ok {
			// One second of slack: the reset is a whole second.
			rs.hint = max(reset.Sub(t.o.Clock.Now()), 0) + time.Second
		}
	}
	if rs.hint > t.o.Budget {
		rs.tooLong = true
	}
	return rs
}

// primaryLimit reports a response with x-ratelimit-remaining: 0.
func primaryLimit(resp *http.Response) bool {
	return resp.StatusCode != http.StatusOK && strings.TrimSpace(resp.Header.Get("X-RateLimit-Remaining")) == "0"
}

// secondaryLimit reports a 403 that GitHub documents as a secondary rate
// limit: a Retry-After header or the "secondary rate limit" message.
func secondaryLimit(resp *http.Response, body []byte) bool {
	if resp.Header.Get("Retry-After") != "" {
		return true
	}
	b := strings.ToLower(string(body))
	return strings.Contains(b, "secondary rate limit") || strings.Contains(b, "abuse detection")
}

// rateReset returns x-ratelimit-reset (epoch seconds) as a time.
func rateReset(resp *http.Response) (time.Time, bool) {
	v := strings.TrimSpace(resp.Header.Get("X-RateLimit-Reset"))
	if v == "" {
		return time.Time{}, false
	}
	secs, err := strconv.ParseInt(v, 10, 64)
	if err != nil || secs <= 0 {
		return time.Time{}, false
	}
	return time.Unix(secs, 0).UTC(), true
}
