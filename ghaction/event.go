package ghaction

import (
	"fmt"
	"strconv"
	"strings"
)

// PullRequestNumber returns the PR to comment on: input (the `pr-number`
// input) when set, else the number in the event payload for
// pull_request / pull_request_target / pull_request_review events, or for
// issue_comment events on a pull request. It returns 0 when there is none
// (push, workflow_dispatch without input, a comment on a plain issue), and
// an error only for a malformed input.
func PullRequestNumber(eventName string, event map[string]any, input string) (int, error) {
	if s := strings.TrimSpace(input); s != "" {
		n, err := strconv.Atoi(strings.TrimPrefix(s, "#"))
		if err != nil || n <= 0 {
			return 0, fmt.Errorf("pr-number %q is not a positive integer", input)
		}
		return n, nil
	}
	switch eventName {
	case "pull_request", "pull_request_target", "pull_request_review", "pull_request_review_comment":
		if pr, ok := event["pull_request"].(map[string]any); ok {
			if n := number(pr["number"]); n > 0 {
				return n, nil
			}
		}
		return number(event["number"]), nil
	case "issue_comment":
		issue, ok := event["issue"].(map[string]any)
		if !ok {
			return 0, nil
		}
		if _, isPR := issue["pull_request"]; !isPR {
			return 0, nil
		}
		return number(issue["number"]), nil
	}
	return 0, nil
}

func number(v any) int {
	switch n := v.(type) {
	case float64:
		if n > 0 && n == float64(int(n)) {
			return int(n)
		}
	case int:
		return n
	}
	return 0
}
