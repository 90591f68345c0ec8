package config

import (
	"regexp"
	"time"
)

// Budget is the `budget:` block (our extension): spend caps in US dollars,
// read from the cost Claude Code reports at the end of every claude step.
type Budget struct {
	// MaxCostUSD caps the whole job (this execution and its resumes);
	// 0 = no job cap.
	MaxCostUSD float64
	// ItemMaxCostUSD caps one item over all its attempts; it is the amount
	// reserved from the job budget before the item starts. 0 = no item cap.
	ItemMaxCostUSD float64
}

// DefaultMaxWaits is rate_limit.max_waits when not given.
const DefaultMaxWaits = 10

// DefaultMaxCooldown is rate_limit.max_cooldown when not given: the
// longest fleet cool-down a provider's retry delay or a subscription
// limit's reset time can start.
const DefaultMaxCooldown = 30 * time.Minute

// RateLimit is the `rate_limit:` block (our extension): how attempts that
// failed because the provider rate-limited or was overloaded are handled.
type RateLimit struct {
	// MaxWaits bounds the rate-limited attempts of one item that do not
	// count against its attempts (default DefaultMaxWaits).
	MaxWaits int
	// MaxCooldown caps one fleet cool-down (default DefaultMaxCooldown): a
	// longer provider retry delay is clamped to it; a subscription limit
	// that resets later stops the job with its items pending.
	MaxCooldown time.Duration
	// On lists the matchers (`rate_limit_on`) that mark a failed shell
	// step as rate-limited; claude steps are recognised from their
	// stream-json output.
	On []RateLimitMatcher
}

// RateLimitMatcher is one `rate_limit_on` entry: exactly one of ExitCode
// (`{exit_code: 75}`) and Pattern (`{pattern: "429"}`, a Go regexp matched
// against the failure message and the step's last output lines).
type RateLimitMatcher struct {
	ExitCode int
	Pattern  string
}

// budget decodes `budget:`.
func (d *decoder) budget(e entry) *Budget {
	o := d.object(e.val, e.path)
	if o == nil {
		return nil
	}
	defer o.finish()
	b := &Budget{}
	positive := func(key string, dst *float64) {
		kv, ok := o.take(key)
		if !ok {
			return
		}
		v, ok := d.number(kv)
		if !ok {
			return
		}
		if v <= 0 {
			d.fail(kv.val, kv.path, "must be a positive amount of US dollars, got %v", v)
			return
		}
		*dst = v
	}
	positive("max_cost_usd", &b.MaxCostUSD)
	positive("item_max_cost_usd", &b.ItemMaxCostUSD)
	if b.MaxCostUSD == 0 && b.ItemMaxCostUSD == 0 && len(o.entries) == 0 {
		d.failAt(o.pos(), e.path, "is empty: set max_cost_usd and/or item_max_cost_usd")
	}
	if b.MaxCostUSD > 0 && b.ItemMaxCostUSD == 0 {
		d.failAt(o.pos(), e.path+".item_max_cost_usd", "missing: max_cost_usd needs item_max_cost_usd, the amount each item reserves from the job budget before it starts")
	}
	if b.MaxCostUSD > 0 && b.ItemMaxCostUSD > b.MaxCostUSD {
		d.failAt(o.pos(), e.path+".item_max_cost_usd", "is %v, more than max_cost_usd (%v): no item could ever start", b.ItemMaxCostUSD, b.MaxCostUSD)
	}
	return b
}

// rateLimit decodes `rate_limit:`.
func (d *decoder) rateLimit(e entry) RateLimit {
	rl := RateLimit{MaxWaits: DefaultMaxWaits, MaxCooldown: DefaultMaxCooldown}
	o := d.object(e.val, e.path)
	if o == nil {
		return rl
	}
	defer o.finish()
	if kv, ok := o.take("max_waits"); ok {
		if n, ok := d.integer(kv, 0); ok {
			rl.MaxWaits = n
		}
	}
	if kv, ok := o.take("max_cooldown"); ok {
		if v, ok := d.duration(kv); ok {
			if v < time.Second {
				d.fail(kv.val, kv.path, "must be at least 1s, got %s", v)
			} else {
				rl.MaxCooldown = v
			}
		}
	}
	if kv, ok := o.take("rate_limit_on"); ok {
		nodes, ok := d.list(kv)
		if ok {
			for i, n := range nodes {
				if m, ok := d.rateLimitMatcher(item(n, kv.path, i)); ok {
					rl.On = append(rl.On, m)
				}
			}
		}
	}
	return rl
}

func (d *decoder) rateLimitMatcher(e entry) (RateLimitMatcher, bool) {
	o := d.object(e.val, e.path)
	if o == nil {
		return RateLimitMatcher{}, false
	}
	defer o.finish()
	code, hasCode := o.take("exit_code")
	pat, hasPat := o.take("pattern")
	switch {
	case hasCode && hasPat:
		d.failAt(o.pos(), e.path, "give either exit_code or pattern, not both")
		return RateLimitMatcher{}, false
	case hasCode:
		n, ok := d.integer(code, 1)
		if ok && n > 255 {
			d.fail(code.val, code.path, "an exit code is at most 255, got %d", n)
			return RateLimitMatcher{}, false
		}
		return RateLimitMatcher{ExitCode: n}, ok
	case hasPat:
		p, ok := d.str(pat)
		if !ok {
			return RateLimitMatcher{}, false
		}
		if _, err := regexp.Compile(p); err != nil {
			d.fail(pat.val, pat.path, "invalid regular expression: %s", err)
			return RateLimitMatcher{}, false
		}
		return RateLimitMatcher{Pattern: p}, true
	}
	d.failAt(o.pos(), e.path, "a rate_limit_on matcher needs exit_code or pattern, e.g. {exit_code: 75} or {pattern: \"429\"}")
	return RateLimitMatcher{}, false
}
