package runner

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prodigy-action/prodigy-action/config"
	"github.com/prodigy-action/prodigy-action/dlq"
	"github.com/prodigy-action/prodigy-action/jobstore"
)

// claudeRun is what one claude step's stream-json transcript says about
// spend and provider errors (types of @anthropic-ai/claude-agent-sdk,
// sdk.d.ts: SDKResultMessage, SDKAPIRetryMessage, SDKAssistantMessage).
type claudeRun struct {
	// Found: the transcript has a final {"type":"result"} event.
	Found   bool
	Subtype string
	IsError bool
	// CostUSD is the result's total_cost_usd.
	CostUSD float64
	// Tokens are the result's modelUsage totals (usage when absent).
	Tokens jobstore.Tokens
	// RateLimit says the provider rate-limited or was overloaded during
	// the run ("" when it did not): "rate_limit", "overloaded", …
	RateLimit string
	// RetryDelay is the provider's last retry delay (api_retry
	// retry_delay_ms); 0 when unknown.
	RetryDelay time.Duration
	// Models names the models of the result's modelUsage, sorted and
	// comma-separated.
	Models string
	// CostInvalid says why the result's total_cost_usd cannot be trusted
	// (missing, not a number, negative, not finite, absurd, or two result
	// events disagreeing); "" when it can. Spend then fails closed
	// (itemSpend.add).
	CostInvalid string
	// ResetsAt is when a rejected subscription limit (rate_limit_event)
	// resets; zero when none was rejected.
	ResetsAt time.Time
}

// maxStepCostUSD is the most one claude step can plausibly cost: a
// reported cost above it is taken as invalid (fail closed), never added.
const maxStepCostUSD = 10000.0

// maxProviderDelay bounds a delay read from a transcript before
// rate_limit.max_cooldown clamps it (no Duration overflow).
const maxProviderDelay = 365 * 24 * time.Hour

// Claude result subtypes of interest.
const subtypeMaxBudget = "error_max_budget_usd"

// claudeEvent holds the fields of the stream-json events read here.
type claudeEvent struct {
	Type           string          `json:"type"`
	Subtype        string          `json:"subtype"`
	IsError        bool            `json:"is_error"`
	Result         string          `json:"result"`
	Error          string          `json:"error"`
	ErrorStatus    *int            `json:"error_status"`
	APIErrorStatus *int            `json:"api_error_status"`
	RetryDelayMS   json.RawMessage `json:"retry_delay_ms"`
	TotalCostUSD   json.RawMessage `json:"total_cost_usd"`
	Errors         []string        `json:"errors"`
	// RateLimitInfo is a rate_limit_event's SDKRateLimitInfo.
	RateLimitInfo *struct {
		Status        string          `json:"status"`
		ResetsAt      json.RawMessage `json:"resetsAt"`
		RateLimitType string          `json:"rateLimitType"`
	} `json:"rate_limit_info"`
	Usage *struct {
		Input         int64 `json:"input_tokens"`
		Output        int64 `json:"output_tokens"`
		CacheRead     int64 `json:"cache_read_input_tokens"`
		CacheCreation int64 `json:"cache_creation_input_tokens"`
	} `json:"usage"`
	ModelUsage map[string]struct {
		Input         int64 `json:"inputTokens"`
		Output        int64 `json:"outputTokens"`
		CacheRead     int64 `json:"cacheReadInputTokens"`
		CacheCreation int64 `json:"cacheCreationInputTokens"`
	} `json:"modelUsage"`
}

// providerBusy maps an SDKAssistantMessageError (or HTTP status) to a
// rate-limit reason, "" when the error is something else.
func providerBusy(errName string, status *int) string {
	switch errName {
	case "rate_limit", "overloaded":
		return errName
	}
	if status != nil {
		switch *status {
		case 429:
			return "rate_limit"
		case 529:
			return "overloaded"
		}
	}
	return ""
}

// busyText recognises a rate-limit or overload in a result's text.
var busyText = regexp.MustCompile(`(?i)rate[ _-]?limit|overloaded|too many requests|(^|[^0-9])(429|529)([^0-9]|$)`)

// scanClaudeRun reads the transcript written after offset.
func scanClaudeRun(path string, offset int64) (claudeRun, error) {
	var run claudeRun
	f, err := os.Open(path)
	if err != nil {
		return run, err
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return run, err
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 || line[0] != '{' {
			continue
		}
		var ev claudeEvent
		if json.Unmarshal(line, &ev) != nil {
			continue
		}
		switch {
		case ev.Type == "system" && ev.Subtype == "api_retry":
			if r := providerBusy(ev.Error, ev.ErrorStatus); r != "" {
				run.RateLimit = r
				run.RetryDelay = providerDelay(ev.RetryDelayMS)
			}
		case ev.Type == "rate_limit_event" && ev.RateLimitInfo != nil && ev.RateLimitInfo.Status == "rejected":
			run.RateLimit = "subscription limit"
			if t := ev.RateLimitInfo.RateLimitType; t != "" && len(t) < 40 {
				run.RateLimit += " (" + t + ")"
			}
			if at, ok := epochSeconds(ev.RateLimitInfo.ResetsAt); ok {
				run.ResetsAt = at
			}
		case ev.Type == "assistant":
			if r := providerBusy(ev.Error, nil); r != "" {
				run.RateLimit = r
			}
		case ev.Type == "result":
			cost, why := parseCost(ev.TotalCostUSD)
			switch {
			case run.Found && why == "" && run.CostInvalid == "" && cost != run.CostUSD:
				// Two results in one run: the larger counts (costs are
				// running totals), and a printed second result can
				// never lower the spend.
				cost = max(cost, run.CostUSD)
			case run.Found && run.CostInvalid != "" && why == "":
				why = run.CostInvalid
			}
			run.Found, run.Subtype, run.IsError, run.CostUSD, run.CostInvalid = true, ev.Subtype, ev.IsError, cost, why
			run.Tokens = jobstore.Tokens{}
			run.Models = strings.Join(slices.Sorted(maps.Keys(ev.ModelUsage)), ",")
			for _, mu := range ev.ModelUsage {
				run.Tokens = run.Tokens.Add(jobstore.Tokens{Input: mu.Input, Output: mu.Output, CacheRead: mu.CacheRead, CacheCreation: mu.CacheCreation})
			}
			if len(ev.ModelUsage) == 0 && ev.Usage != nil {
				run.Tokens = jobstore.Tokens{Input: ev.Usage.Input, Output: ev.Usage.Output, CacheRead: ev.Usage.CacheRead, CacheCreation: ev.Usage.CacheCreation}
			}
			if ev.IsError || (ev.Subtype != "" && ev.Subtype != "success") {
				if r := providerBusy("", ev.APIErrorStatus); r != "" {
					run.RateLimit = r
				} else if busyText.MatchString(ev.Result) || busyText.MatchString(strings.Join(ev.Errors, "\n")) {
					run.RateLimit = "rate_limit"
				}
			}
		}
	}
	return run, sc.Err()
}

// parseCost reads a result's total_cost_usd: a JSON number, finite, at
// least 0 and at most maxStepCostUSD; otherwise why says what is wrong.
func parseCost(raw json.RawMessage) (cost float64, why string) {
	if len(raw) == 0 || string(raw) == "null" {
		return 0, "the result has no total_cost_usd"
	}
	var n json.Number
	if err := json.Unmarshal(raw, &n); err != nil || raw[0] == '"' {
		return 0, fmt.Sprintf("total_cost_usd %s is not a number", oneLine(string(raw), 40))
	}
	v, err := strconv.ParseFloat(n.String(), 64)
	switch {
	case err != nil || math.IsInf(v, 0) || math.IsNaN(v):
		return 0, fmt.Sprintf("total_cost_usd %s is not a finite number", oneLine(n.String(), 40))
	case v < 0:
		return 0, fmt.Sprintf("total_cost_usd %s is negative", n)
	case v > maxStepCostUSD:
		return 0, fmt.Sprintf("total_cost_usd %s is more than one step can cost ($%.0f)", oneLine(n.String(), 40), maxStepCostUSD)
	}
	return v, ""
}

// providerDelay reads a retry_delay_ms: a finite number of milliseconds,
// 0 when it is not one, at most maxProviderDelay.
func providerDelay(raw json.RawMessage) time.Duration {
	var ms float64
	if json.Unmarshal(raw, &ms) != nil || math.IsNaN(ms) || ms <= 0 {
		return 0
	}
	if ms >= float64(maxProviderDelay/time.Millisecond) {
		return maxProviderDelay
	}
	return time.Duration(ms * float64(time.Millisecond))
}

// epochSeconds reads a resetsAt (Unix seconds); false when it is not a
// finite positive number before year 9999.
func epochSeconds(raw json.RawMessage) (time.Time, bool) {
	var sec float64
	if json.Unmarshal(raw, &sec) != nil || math.IsNaN(sec) || sec <= 0 || sec > 253402300799 {
		return time.Time{}, false
	}
	return time.Unix(int64(sec), 0).UTC(), true
}

// itemSpend is one item's spend in this run of the job and the
// rate-limit signal of its current attempt; safe for concurrent use. A
// nil *itemSpend (setup, reduce, handlers) accounts nothing.
type itemSpend struct {
	mu sync.Mutex
	// reserved is the item's reservation from the job budget (what is
	// left of item_max_cost_usd); capped says there is one.
	reserved float64
	capped   bool
	// spent and tokens are this run's (all attempts).
	spent   float64
	tokens  jobstore.Tokens
	claudes int // claude steps accounted
	// attempt is this attempt's spend.
	attempt float64
	// busy is the current attempt's rate-limit signal.
	busy     string
	delay    time.Duration
	resetsAt time.Time
	matchers []config.RateLimitMatcher
}

// budgetEpsilon absorbs float rounding in dollar comparisons.
const budgetEpsilon = 1e-9

// left is what remains of the reservation; +Inf-like (-1) when uncapped.
func (s *itemSpend) left() (float64, bool) {
	if s == nil {
		return 0, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reserved - s.spent, s.capped
}

// budgetArgs are the Claude Code flags that cap one claude step: what is
// left of the item's reservation.
func (s *itemSpend) budgetArgs() []string {
	left, capped := s.left()
	if !capped {
		return nil
	}
	return []string{"--max-budget-usd", strconv.FormatFloat(max(left, 0), 'f', 4, 64)}
}

func (s *itemSpend) beginAttempt() {
	if s == nil {
		return
	}
	s.mu.Lock()
	s.attempt, s.busy, s.delay, s.resetsAt = 0, "", 0, time.Time{}
	s.mu.Unlock()
}

// add accounts one claude run and returns what it counted. A cost that
// cannot be trusted (run.CostInvalid, or no result at all from a run that
// failed) fails closed: it counts as everything left of the item's
// reservation, so the item starts no further claude step and the job's
// budget is charged what it set aside; without an item budget it counts 0.
func (s *itemSpend) add(run claudeRun) float64 {
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

func (s *itemSpend) markBusy(reason string, delay time.Duration, resetsAt time.Time) {
	if s == nil {
		return
	}
	s.mu.Lock()
	s.busy, s.delay, s.resetsAt = reason, delay, resetsAt
	s.mu.Unlock()
}

// rateLimited is the current attempt's rate-limit signal: the reason, the
// provider's retry delay (0 when unknown) and when a rejected subscription
// limit resets (zero when none).
func (s *itemSpend) rateLimited() (string, time.Duration, time.Time) {
	if s == nil {
		return "", 0, time.Time{}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.busy, s.delay, s.resetsAt
}

// totals are this run's spend and tokens.
func (s *itemSpend) totals() (float64, jobstore.Tokens, int) {
	if s == nil {
		return 0, jobstore.Tokens{}, 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.spent, s.tokens, s.claudes
}

// accountedClaude runs a claude step (stepRunner.claude) within the
// item's budget and accounts its spend and provider errors: a step with
// nothing left of the item's reservation does not start; a run that ended
// error_max_budget_usd is ResourceExhausted (permanent when the item's
// budget is spent); a failed run that saw the provider rate-limit or
// overload is marked rate-limited for the attempt.
func (s *stepRunner) accountedClaude(ctx context.Context, st config.Step, sc *stepContext) (string, *stepFailure) {
	if left, capped := sc.spend.left(); capped && left <= budgetEpsilon {
		return "", &stepFailure{Type: dlq.ErrorType{Kind: dlq.ResourceExhausted}, Permanent: true,
			Message: fmt.Sprintf("%s: the item's budget (item_max_cost_usd) is spent; the claude step did not start", sc.label)}
	}
	var offset int64
	if fi, err := os.Stat(sc.transcript); err == nil {
		offset = fi.Size()
	}
	out, f := s.claude(ctx, st, sc)
	fault(ctx, FaultClaudeDone, sc.label)
	if fi, err := os.Stat(sc.transcript); f != nil && (err != nil || fi.Size() == offset) {
		return out, f // Claude Code wrote nothing: it never started a request
	}
	run, err := scanClaudeRun(sc.transcript, offset)
	if err != nil {
		run = claudeRun{CostInvalid: fmt.Sprintf("read the transcript: %v", err)}
	}
	if !run.Found && f == nil && run.CostInvalid == "" {
		return out, f // nothing ran that could have spent
	}
	counted := sc.spend.add(run)
	sc.claude = &run
	switch {
	case run.Found && run.CostInvalid == "":
		fmt.Fprintf(sc.log, "--- claude step cost $%.4f (%d input, %d output tokens)\n", run.CostUSD, run.Tokens.Input, run.Tokens.Output)
	case run.CostInvalid != "":
		fmt.Fprintf(sc.log, "--- claude step cost unknown (%s): counted as $%.4f, what was left of the item's budget\n", run.CostInvalid, counted)
	default:
		fmt.Fprintf(sc.log, "--- claude step wrote no result: its cost counts as $%.4f, what was left of the item's budget\n", counted)
	}
	if f == nil || f.Interrupted {
		return out, f
	}
	if run.Subtype == subtypeMaxBudget {
		left, _ := sc.spend.left()
		f.Type = dlq.ErrorType{Kind: dlq.ResourceExhausted}
		f.Message = fmt.Sprintf("%s: Claude Code stopped at its budget (--max-budget-usd, error_max_budget_usd) [%s]", sc.label, f.Message)
		f.Permanent = f.Permanent || left <= budgetEpsilon
		return out, f
	}
	if run.RateLimit != "" && run.Subtype != "error_max_turns" {
		sc.spend.markBusy("claude: "+run.RateLimit, run.RetryDelay, run.ResetsAt)
	}
	return out, f
}

// noteShellFailure marks a failed shell step rate-limited when a
// rate_limit_on matcher matches its exit code or output.
func (s *itemSpend) noteShellFailure(f *stepFailure) {
	if s == nil || f == nil || f.Interrupted || len(s.matchers) == 0 {
		return
	}
	text := f.Message + "\n" + lastLines(f.Tail, 20)
	for _, m := range s.matchers {
		switch {
		case m.ExitCode != 0 && f.Type.Kind == dlq.CommandFailed && f.Type.ExitCode == m.ExitCode:
			s.markBusy(fmt.Sprintf("shell: exit code %d", m.ExitCode), 0, time.Time{})
			return
		case m.Pattern != "":
			if re, err := regexp.Compile(m.Pattern); err == nil && re.MatchString(text) {
				s.markBusy(fmt.Sprintf("shell: output matches %q", m.Pattern), 0, time.Time{})
				return
			}
		}
	}
}
