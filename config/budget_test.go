package config_test

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/prodigy-action/prodigy-action/config"
)

const budgetMap = "map:\n  input: items.json\n  agent_template:\n    - shell: 'true'\n"

func TestBudgetAndRateLimit(t *testing.T) {
	t.Parallel()
	w, err := config.Parse("w.yml", []byte("budget:\n  max_cost_usd: 25\n  item_max_cost_usd: 2.5\nrate_limit:\n  max_waits: 4\n  max_cooldown: 2h\n  rate_limit_on:\n    - {exit_code: 75}\n    - {pattern: \"429\"}\n"+budgetMap))
	if err != nil {
		t.Fatal(err)
	}
	if w.Budget == nil || *w.Budget != (config.Budget{MaxCostUSD: 25, ItemMaxCostUSD: 2.5}) {
		t.Errorf("budget = %+v", w.Budget)
	}
	want := config.RateLimit{MaxWaits: 4, MaxCooldown: 2 * time.Hour, On: []config.RateLimitMatcher{{ExitCode: 75}, {Pattern: "429"}}}
	if !reflect.DeepEqual(w.RateLimit, want) {
		t.Errorf("rate_limit = %+v, want %+v", w.RateLimit, want)
	}
	w, err = config.Parse("w.yml", []byte(budgetMap))
	if err != nil {
		t.Fatal(err)
	}
	if w.Budget != nil || w.RateLimit.MaxWaits != config.DefaultMaxWaits || w.RateLimit.MaxCooldown != config.DefaultMaxCooldown || w.RateLimit.On != nil {
		t.Errorf("defaults: budget %+v rate_limit %+v", w.Budget, w.RateLimit)
	}
}

func TestBudgetErrors(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ src, want string }{
		{"budget:\n  max_cost_usd: -1\n  item_max_cost_usd: 1\n", "w.yml:2:17: budget.max_cost_usd: must be a positive amount"},
		{"budget:\n  max_cost_usd: 5\n", "w.yml:2:3: budget.item_max_cost_usd: missing"},
		{"budget:\n  max_cost_usd: 5\n  item_max_cost_usd: 6\n", "no item could ever start"},
		{"budget:\n  max_cost: 5\n", "w.yml:2:3: budget.max_cost: unknown key \"max_cost\"; accepted keys here: item_max_cost_usd, max_cost_usd"},
		{"budget:\n  max_cost_usd: lots\n  item_max_cost_usd: 1\n", "w.yml:2:17: budget.max_cost_usd: must be a number"},
		{"rate_limit:\n  max_waits: -1\n", "w.yml:2:14: rate_limit.max_waits: must be at least 0"},
		{"rate_limit:\n  rate_limit_on:\n    - {exit_code: 75, pattern: x}\n", "w.yml:3:7: rate_limit.rate_limit_on[0]: give either exit_code or pattern"},
		{"rate_limit:\n  rate_limit_on:\n    - {pattern: \"(\"}\n", "rate_limit.rate_limit_on[0].pattern: invalid regular expression"},
		{"rate_limit:\n  rate_limit_on:\n    - {exit_code: 300}\n", "an exit code is at most 255"},
		{"rate_limit:\n  rate_limit_on:\n    - {code: 3}\n", "unknown key \"code\""},
		{"rate_limit:\n  wait: 3\n", "w.yml:2:3: rate_limit.wait: unknown key"},
	} {
		_, err := config.Parse("w.yml", []byte(tt.src+budgetMap))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: err = %v, want it to contain %q", tt.src, err, tt.want)
		}
	}
}
