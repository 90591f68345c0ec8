package spend

import (
	"bufio"
	"bytes"
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
	"time"
)

// ClaudeRun is what one claude step's stream-json transcript says about
// spend and provider errors (types of @anthropic-ai/claude-agent-sdk,
// sdk.d.ts: SDKResultMessage, SDKAPIRetryMessage, SDKAssistantMessage).
type ClaudeRun struct {
	// Found: the transcript has a final {"type":"result"} event.
	Found   bool
	Subtype string
	IsError bool
	// CostUSD is the result's total_cost_usd.
	CostUSD float64
	// Tokens are the result's modelUsage totals (usage when absent).
	Tokens Tokens
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
	// (ItemSpend.Add).
	CostInvalid string
	// ResetsAt is when a rejected subscription limit (rate_limit_event)
	// resets; zero when none was rejected.
	ResetsAt time.Time
}

// MaxStepCostUSD is the most one claude step can plausibly cost: a
// reported cost above it is taken as invalid (fail closed), never added.
const MaxStepCostUSD = 10000.0

// maxProviderDelay bounds a delay read from a transcript before
// rate_limit.max_cooldown clamps it (no Duration overflow).
const maxProviderDelay = 365 * 24 * time.Hour

// SubtypeMaxBudget is the result subtype of a run Claude Code stopped at
// its --max-budget-usd.
const SubtypeMaxBudget = "error_max_budget_usd"

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

// LooksBusy reports whether text (a result's, an error message) says the
// provider rate-limited or was overloaded.
func LooksBusy(text string) bool { return busyText.MatchString(text) }

// busyText recognises a rate-limit or overload in a result's text.
var busyText = regexp.MustCompile(`(?i)rate[ _-]?limit|overloaded|too many requests|(^|[^0-9])(429|529)([^0-9]|$)`)

// ScanClaudeRun reads the transcript written after offset.
func ScanClaudeRun(path string, offset int64) (ClaudeRun, error) {
	var run ClaudeRun
	err := EachTranscriptLine(path, offset, func(line []byte) {
		var ev claudeEvent
		if json.Unmarshal(line, &ev) != nil {
			return
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
			run.Tokens = Tokens{}
			run.Models = strings.Join(slices.Sorted(maps.Keys(ev.ModelUsage)), ",")
			for _, mu := range ev.ModelUsage {
				run.Tokens = run.Tokens.Add(Tokens{Input: mu.Input, Output: mu.Output, CacheRead: mu.CacheRead, CacheCreation: mu.CacheCreation})
			}
			if len(ev.ModelUsage) == 0 && ev.Usage != nil {
				run.Tokens = Tokens{Input: ev.Usage.Input, Output: ev.Usage.Output, CacheRead: ev.Usage.CacheRead, CacheCreation: ev.Usage.CacheCreation}
			}
			if ev.IsError || (ev.Subtype != "" && ev.Subtype != "success") {
				if r := providerBusy("", ev.APIErrorStatus); r != "" {
					run.RateLimit = r
				} else if busyText.MatchString(ev.Result) || busyText.MatchString(strings.Join(ev.Errors, "\n")) {
					run.RateLimit = "rate_limit"
				}
			}
		}
	})
	return run, err
}

// EachTranscriptLine calls fn with every line of the stream-json
// transcript at path written after offset that holds a JSON object
// (trimmed; a line over 64 MiB ends the read with an error). fn must not
// keep line.
func EachTranscriptLine(path string, offset int64, fn func(line []byte)) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return err
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	for sc.Scan() {
		if line := bytes.TrimSpace(sc.Bytes()); len(line) > 0 && line[0] == '{' {
			fn(line)
		}
	}
	return sc.Err()
}

// parseCost reads a result's total_cost_usd: a JSON number, finite, at
// least 0 and at most MaxStepCostUSD; otherwise why says what is wrong.
func parseCost(raw json.RawMessage) (cost float64, why string) {
	if len(raw) == 0 || string(raw) == "null" {
		return 0, "the result has no total_cost_usd"
	}
	var n json.Number
	if err := json.Unmarshal(raw, &n); err != nil || raw[0] == '"' {
		return 0, fmt.Sprintf("total_cost_usd %s is not a number", clip(string(raw), 40))
	}
	v, err := strconv.ParseFloat(n.String(), 64)
	switch {
	case err != nil || math.IsInf(v, 0) || math.IsNaN(v):
		return 0, fmt.Sprintf("total_cost_usd %s is not a finite number", clip(n.String(), 40))
	case v < 0:
		return 0, fmt.Sprintf("total_cost_usd %s is negative", n)
	case v > MaxStepCostUSD:
		return 0, fmt.Sprintf("total_cost_usd %s is more than one step can cost ($%.0f)", clip(n.String(), 40), MaxStepCostUSD)
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

// Tokens counts the tokens of Claude runs.
type Tokens struct {
	Input         int64 `json:"input"`
	Output        int64 `json:"output"`
	CacheRead     int64 `json:"cache_read"`
	CacheCreation int64 `json:"cache_creation"`
}

// Add returns t plus u.
func (t Tokens) Add(u Tokens) Tokens {
	return Tokens{Input: t.Input + u.Input, Output: t.Output + u.Output, CacheRead: t.CacheRead + u.CacheRead, CacheCreation: t.CacheCreation + u.CacheCreation}
}

// clip shortens s to one line of at most n runes.
func clip(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	r := []rune(s)
	if len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
