package runner

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
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
}

// Claude result subtypes of interest.
const subtypeMaxBudget = "error_max_budget_usd"

// claudeEvent holds the fields of the stream-json events read here.
type claudeEvent struct {
	Type           string   `json:"type"`
	Subtype        string   `json:"subtype"`
	IsError        bool     `json:"is_error"`
	Result         string   `json:"result"`
	Error          string   `json:"error"`
	ErrorStatus    *int     `json:"error_status"`
	APIErrorStatus *int     `json:"api_error_status"`
	RetryDelayMS   float64  `json:"retry_delay_ms"`
	TotalCostUSD   float64  `json:"total_cost_usd"`
	Errors         []string `json:"errors"`
	Usage          *struct {
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
				run.RetryDelay = time.Duration(ev.RetryDelayMS * float64(time.Millisecond))
			}
		case ev.Type == "assistant":
			if r := providerBusy(ev.Error, nil); r != "" {
				run.RateLimit = r
			}
		case ev.Type == "result":
			run.Found, run.Subtype, run.IsError, run.CostUSD = true, ev.Subtype, ev.IsError, ev.TotalCostUSD
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
	s.attempt, s.busy, s.delay = 0, "", 0
	s.mu.Unlock()
}

func (s *itemSpend) add(run claudeRun) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.spent += run.CostUSD
	s.attempt += run.CostUSD
	s.tokens = s.tokens.Add(run.Tokens)
	s.claudes++
}

func (s *itemSpend) markBusy(reason string, delay time.Duration) {
	if s == nil {
		return
	}
	s.mu.Lock()
	s.busy, s.delay = reason, delay
	s.mu.Unlock()
}

// rateLimited is the current attempt's rate-limit signal.
func (s *itemSpend) rateLimited() (string, time.Duration) {
	if s == nil {
		return "", 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.busy, s.delay
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
	run, err := scanClaudeRun(sc.transcript, offset)
	if err != nil || !run.Found && run.RateLimit == "" {
		return out, f
	}
	sc.spend.add(run)
	sc.claude = &run
	if run.Found {
		fmt.Fprintf(sc.log, "--- claude step cost $%.4f (%d input, %d output tokens)\n", run.CostUSD, run.Tokens.Input, run.Tokens.Output)
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
		sc.spend.markBusy("claude: "+run.RateLimit, run.RetryDelay)
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
			s.markBusy(fmt.Sprintf("shell: exit code %d", m.ExitCode), 0)
			return
		case m.Pattern != "":
			if re, err := regexp.Compile(m.Pattern); err == nil && re.MatchString(text) {
				s.markBusy(fmt.Sprintf("shell: output matches %q", m.Pattern), 0)
				return
			}
		}
	}
}
