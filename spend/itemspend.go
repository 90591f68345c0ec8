package spend

import (
	"fmt"
	"regexp"
	"strconv"
	"sync"
	"time"
)

// ItemSpend is one item's spend in this run of the job and the
// rate-limit signal of its current attempt; safe for concurrent use. A
// nil *ItemSpend (setup, reduce, handlers) accounts nothing.
type ItemSpend struct {
	mu sync.Mutex
	// reserved is the item's reservation from the job budget (what is
	// Left of item_max_cost_usd); capped says there is one.
	reserved float64
	capped   bool
	// spent and tokens are this run's (all attempts).
	spent   float64
	tokens  Tokens
	claudes int // claude steps accounted
	// attempt is this attempt's spend.
	attempt float64
	// busy is the current attempt's rate-limit signal.
	busy     string
	delay    time.Duration
	resetsAt time.Time
	matchers []RateLimitMatcher
}

// Epsilon absorbs float rounding in dollar comparisons.
const Epsilon = 1e-9

// NewItemSpend returns the spend of an item that reserved reserved dollars
// of the job budget (capped: it has an item budget; else the reservation
// is nothing), marked rate-limited when a failed shell step matches one of
// matchers. The zero ItemSpend is uncapped with no matchers (setup,
// reduce).
func NewItemSpend(reserved float64, capped bool, matchers []RateLimitMatcher) *ItemSpend {
	return &ItemSpend{reserved: reserved, capped: capped, matchers: matchers}
}

// RateLimitMatcher is a rate_limit_on entry: a shell step that failed with
// ExitCode (when not 0) or whose output matches Pattern (a regular
// expression, when not "") hit a rate limit.
type RateLimitMatcher struct {
	ExitCode int
	Pattern  string
}

// Left is what remains of the reservation; +Inf-like (-1) when uncapped.
func (s *ItemSpend) Left() (float64, bool) {
	if s == nil {
		return 0, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reserved - s.spent, s.capped
}

// BudgetArgs are the Claude Code flags that cap one claude step: what is
// Left of the item's reservation.
func (s *ItemSpend) BudgetArgs() []string {
	left, capped := s.Left()
	if !capped {
		return nil
	}
	return []string{"--max-budget-usd", strconv.FormatFloat(max(left, 0), 'f', 4, 64)}
}

// BeginAttempt starts an attempt: its spend and rate-limit signal are
// reset.
func (s *ItemSpend) BeginAttempt() {
	if s == nil {
		return
	}
	s.mu.Lock()
	s.attempt, s.busy, s.delay, s.resetsAt = 0, "", 0, time.Time{}
	s.mu.Unlock()
}

// Add accounts one claude run and returns what it counted. A cost that
// cannot be trusted (run.CostInvalid, or no result at all from a run that
// failed) fails closed: it counts as everything left of the item's
// reservation, so the item starts no further claude step and the job's
// budget is charged what it set aside; without an item budget it counts 0.
func (s *ItemSpend) Add(run ClaudeRun) float64 {
	if s == nil {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cost := run.CostUSD
	if run.CostInvalid != "" || !run.Found {
		cost = 0
		if s.capped {
			cost = max(s.reserved-s.spent, 0)
		}
	}
	s.spent += cost
	s.attempt += cost
	s.tokens = s.tokens.Add(run.Tokens)
	s.claudes++
	return cost
}

// MarkBusy marks the attempt rate-limited: the reason, the provider's
// retry delay (0: unknown), when a subscription limit resets (zero: none).
func (s *ItemSpend) MarkBusy(reason string, delay time.Duration, resetsAt time.Time) {
	if s == nil {
		return
	}
	s.mu.Lock()
	s.busy, s.delay, s.resetsAt = reason, delay, resetsAt
	s.mu.Unlock()
}

// RateLimited is the current attempt's rate-limit signal: the reason, the
// provider's retry delay (0 when unknown) and when a rejected subscription
// limit resets (zero when none).
func (s *ItemSpend) RateLimited() (string, time.Duration, time.Time) {
	if s == nil {
		return "", 0, time.Time{}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.busy, s.delay, s.resetsAt
}

// Totals are this run's spend and tokens.
func (s *ItemSpend) Totals() (float64, Tokens, int) {
	if s == nil {
		return 0, Tokens{}, 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.spent, s.tokens, s.claudes
}

// AttemptCost is what the current attempt spent so far.
func (s *ItemSpend) AttemptCost() float64 {
	if s == nil {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.attempt
}

// NoteShellFailure marks the attempt rate-limited when a matcher matches
// a failed shell step: its exit code (exitCode, 0 when it did not fail
// with one) or its text (message and last output lines).
func (s *ItemSpend) NoteShellFailure(exitCode int, text string) {
	if s == nil || len(s.matchers) == 0 {
		return
	}
	for _, m := range s.matchers {
		switch {
		case m.ExitCode != 0 && exitCode == m.ExitCode:
			s.MarkBusy(fmt.Sprintf("shell: exit code %d", m.ExitCode), 0, time.Time{})
			return
		case m.Pattern != "":
			if re, err := regexp.Compile(m.Pattern); err == nil && re.MatchString(text) {
				s.MarkBusy(fmt.Sprintf("shell: output matches %q", m.Pattern), 0, time.Time{})
				return
			}
		}
	}
}
