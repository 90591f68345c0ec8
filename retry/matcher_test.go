package retry_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"regexp"
	"testing"

	"github.com/prodigy-action/prodigy-action/retry"
)

func TestMatcher(t *testing.T) {
	t.Parallel()
	opErr := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("boom")}
	tests := []struct {
		name string
		m    retry.Matcher
		err  error
		want bool
	}{
		{"network by text", retry.Matcher{Kind: "network"}, errors.New("Connection reset by peer"), true},
		{"network refused", retry.Matcher{Kind: "network"}, errors.New("dial: REFUSED"), true},
		{"network unreachable", retry.Matcher{Kind: "network"}, errors.New("host unreachable"), true},
		{"network by type", retry.Matcher{Kind: "network"}, fmt.Errorf("fetch: %w", opErr), true},
		{"network no match", retry.Matcher{Kind: "network"}, errors.New("exit status 1"), false},
		{"timeout by text", retry.Matcher{Kind: "timeout"}, errors.New("operation Timed Out"), true},
		{"timeout by deadline", retry.Matcher{Kind: "timeout"}, fmt.Errorf("step: %w", context.DeadlineExceeded), true},
		{"timeout no match", retry.Matcher{Kind: "timeout"}, errors.New("compile error"), false},
		{"server error 503", retry.Matcher{Kind: "server_error"}, errors.New("HTTP 503 Service Unavailable"), true},
		{"server error text", retry.Matcher{Kind: "server_error"}, errors.New("Internal Server Error"), true},
		{"server error needs whole number", retry.Matcher{Kind: "server_error"}, errors.New("processed 1500 files"), false},
		{"501 is not a server_error match", retry.Matcher{Kind: "server_error"}, errors.New("status 501"), false},
		{"rate limit 429", retry.Matcher{Kind: "rate_limit"}, errors.New("status 429"), true},
		{"rate limit text", retry.Matcher{Kind: "rate_limit"}, errors.New("API rate limit exceeded"), true},
		{"too many requests", retry.Matcher{Kind: "rate_limit"}, errors.New("Too Many Requests"), true},
		{"rate limit no match", retry.Matcher{Kind: "rate_limit"}, errors.New("id 14290"), false},
		{"pattern match", retry.Matcher{Kind: "pattern", Pattern: regexp.MustCompile(`flaky test \d+`)}, errors.New("flaky test 12 failed"), true},
		{"pattern is case sensitive", retry.Matcher{Kind: "pattern", Pattern: regexp.MustCompile(`Flaky`)}, errors.New("flaky"), false},
		{"nil pattern", retry.Matcher{Kind: "pattern"}, errors.New("anything"), false},
		{"unknown kind", retry.Matcher{Kind: "cosmic_ray"}, errors.New("network"), false},
		{"nil error", retry.Matcher{Kind: "network"}, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := tt.m.Matches(tt.err); got != tt.want {
				t.Errorf("Matches(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}
