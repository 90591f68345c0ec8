package config

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/goccy/go-yaml/ast"
)

// Defaults of a retry_config block (seed backoff-strategies.md).
const (
	DefaultAttempts     = 3
	DefaultInitialDelay = time.Second
	DefaultMaxDelay     = 30 * time.Second
	DefaultJitterFactor = 0.3
	DefaultBase         = 2.0
)

// DefaultRetryConfig returns the seed's defaults: 3 attempts, exponential
// backoff with base 2, initial_delay 1s, max_delay 30s, no jitter
// (factor 0.3 when enabled), every error retried, no budget.
func DefaultRetryConfig() RetryConfig {
	return RetryConfig{
		Attempts:     DefaultAttempts,
		Backoff:      BackoffConfig{Kind: BackoffExponential, Base: DefaultBase},
		InitialDelay: DefaultInitialDelay,
		MaxDelay:     DefaultMaxDelay,
		JitterFactor: DefaultJitterFactor,
	}
}

// matcherKinds are the retry_on names accepted besides {pattern: REGEX}.
var matcherKinds = []string{"network", "timeout", "server_error", "rate_limit"}

// backoffKinds lists the strategies in the order shown in messages.
var backoffKinds = []string{BackoffExponential, BackoffFixed, BackoffLinear, BackoffFibonacci, BackoffCustom}

const backoffForms = "backoff: exponential|fixed|fibonacci, or {exponential: {base: 2.0}}, {linear: {increment: 2s}}, " +
	"{custom: {delays: [500ms, 1s]}}, {fixed: {delay: 5s}}, {fibonacci: {initial: 1s}}"

// retryConfig decodes a retry_config / retry block, applying defaults.
func (d *decoder) retryConfig(e entry) *RetryConfig {
	o := d.object(e.val, e.path)
	if o == nil {
		return nil
	}
	rc := DefaultRetryConfig()
	d.attempts(o, &rc)
	initialSet := false
	if kv, ok := o.take("initial_delay"); ok {
		rc.InitialDelay, _ = d.duration(kv)
		initialSet = true
	}
	if kv, ok := o.take("max_delay"); ok {
		if v, ok := d.duration(kv); ok {
			if v <= 0 {
				d.fail(kv.val, kv.path, "must be positive")
			} else {
				rc.MaxDelay = v
			}
		}
	}
	if kv, ok := o.take("backoff"); ok {
		if initial, ip, ok := d.backoff(kv, &rc.Backoff); ok {
			if initialSet {
				d.fail(ip, kv.path, "sets the initial delay, and so does initial_delay: keep only one")
			} else {
				rc.InitialDelay = initial
			}
		}
	}
	if kv, ok := o.take("jitter"); ok {
		rc.Jitter, _ = d.boolean(kv)
	}
	if kv, ok := o.take("jitter_factor"); ok {
		if f, ok := d.number(kv); ok {
			if f < 0 || f > 1 {
				d.fail(kv.val, kv.path, "must be between 0 and 1, got %v", f)
			} else {
				rc.JitterFactor = f
			}
		}
	}
	if kv, ok := o.take("retry_on"); ok {
		rc.RetryOn = d.retryOn(kv)
	}
	if kv, ok := o.take("retry_budget"); ok {
		if v, ok := d.duration(kv); ok {
			if v <= 0 {
				d.fail(kv.val, kv.path, "must be positive (omit it for no budget)")
			} else {
				rc.RetryBudget = v
			}
		}
	}
	o.finish()
	if rc.InitialDelay > rc.MaxDelay {
		d.warn(e.val, e.path, "initial_delay %s exceeds max_delay %s: every wait will be %s", rc.InitialDelay, rc.MaxDelay, rc.MaxDelay)
	}
	return &rc
}

// attempts decodes attempts or its alias max_attempts (not both).
func (d *decoder) attempts(o *object, rc *RetryConfig) {
	a, hasA := o.take("attempts")
	m, hasM := o.take("max_attempts")
	if hasA && hasM {
		d.fail(m.keyNode, m.path, "max_attempts is an alias of attempts: set only one")
		return
	}
	if hasM {
		a = m
	}
	if hasA || hasM {
		if n, ok := d.integer(a, 1); ok {
			rc.Attempts = n
		}
	}
}

// backoff decodes the backoff value into b. It returns the initial delay
// an explicit `initial:`/`delay:` sets, with the node holding it, and
// whether one was set.
func (d *decoder) backoff(e entry, b *BackoffConfig) (time.Duration, ast.Node, bool) {
	switch d.value(e.val).(type) {
	case *ast.StringNode, *ast.TagNode:
		name, _ := d.str(e)
		switch name {
		case BackoffFixed, BackoffFibonacci:
			*b = BackoffConfig{Kind: name}
		case BackoffExponential:
			*b = BackoffConfig{Kind: name, Base: DefaultBase}
		case BackoffLinear:
			d.fail(e.val, e.path, "linear needs an increment: backoff: {linear: {increment: 2s}}")
		case BackoffCustom:
			d.fail(e.val, e.path, "custom needs its delays: backoff: {custom: {delays: [500ms, 1s, 2s]}}")
		default:
			d.fail(e.val, e.path, "unknown backoff %q; accepted: %s", name, backoffForms)
		}
		return 0, nil, false
	case *ast.MappingNode, *ast.MappingValueNode:
	default:
		d.fail(e.val, e.path, "must be a strategy name or a mapping, got %s; accepted: %s", d.kind(e.val), backoffForms)
		return 0, nil, false
	}
	es, _ := d.entries(e.val, e.path)
	if len(es) != 1 {
		d.fail(e.val, e.path, "must name exactly one strategy (%s), got %d keys", strings.Join(backoffKinds, ", "), len(es))
		return 0, nil, false
	}
	kind := es[0]
	o := d.object(kind.val, kind.path)
	if o == nil {
		return 0, nil, false
	}
	defer o.finish()
	*b = BackoffConfig{Kind: kind.key}
	switch kind.key {
	case BackoffFixed:
		return d.initialKey(o, "delay")
	case BackoffLinear:
		if kv, ok := o.take("increment"); ok {
			b.Increment, _ = d.duration(kv)
		} else {
			d.failAt(d.pos(kind.keyNode), kind.path, "missing increment, e.g. {linear: {increment: 2s}}")
		}
		return d.initialKey(o, "initial")
	case BackoffExponential:
		b.Base = DefaultBase
		d.base(o, b)
		return d.initialKey(o, "initial")
	case BackoffFibonacci:
		return d.initialKey(o, "initial")
	case BackoffCustom:
		if kv, ok := o.take("delays"); ok {
			b.Delays = d.delays(kv)
		} else {
			d.failAt(d.pos(kind.keyNode), kind.path, "missing delays, e.g. {custom: {delays: [500ms, 1s, 2s]}}")
		}
		return 0, nil, false
	}
	d.fail(kind.keyNode, kind.path, "unknown backoff strategy %q; accepted: %s", kind.key, backoffForms)
	o.entries = nil // the strategy is unknown: its keys cannot be judged
	return 0, nil, false
}

// initialKey decodes the explicit initial delay of an error_policy-style
// strategy (`initial:` or, for fixed, `delay:`).
func (d *decoder) initialKey(o *object, key string) (time.Duration, ast.Node, bool) {
	kv, ok := o.take(key)
	if !ok {
		return 0, nil, false
	}
	v, ok := d.duration(kv)
	return v, kv.keyNode, ok
}

// base decodes exponential `base` or its error_policy alias `multiplier`.
func (d *decoder) base(o *object, b *BackoffConfig) {
	kb, hasB := o.take("base")
	km, hasM := o.take("multiplier")
	if hasB && hasM {
		d.fail(km.keyNode, km.path, "multiplier is an alias of base: set only one")
		return
	}
	if hasM {
		kb = km
	}
	if !hasB && !hasM {
		return
	}
	if f, ok := d.number(kb); ok {
		if f < 1 {
			d.fail(kb.val, kb.path, "must be at least 1 (a smaller base shrinks the delays), got %v", f)
			return
		}
		b.Base = f
	}
}

// delays decodes the custom delay list.
func (d *decoder) delays(e entry) []time.Duration {
	nodes, ok := d.list(e)
	if !ok {
		return nil
	}
	out := make([]time.Duration, 0, len(nodes))
	for i, n := range nodes {
		if v, ok := d.duration(item(n, e.path, i)); ok {
			out = append(out, v)
		}
	}
	return out
}

// retryOn decodes the retry_on matcher list.
func (d *decoder) retryOn(e entry) []MatcherConfig {
	nodes, ok := d.list(e)
	if !ok {
		return nil
	}
	var out []MatcherConfig
	for i, n := range nodes {
		it := item(n, e.path, i)
		if m, ok := d.matcher(it); ok {
			out = append(out, m)
		}
	}
	return out
}

func (d *decoder) matcher(e entry) (MatcherConfig, bool) {
	accepted := strings.Join(matcherKinds, ", ") + ", or {pattern: REGEX}"
	switch d.value(e.val).(type) {
	case *ast.StringNode, *ast.TagNode:
		s, _ := d.str(e)
		for _, k := range matcherKinds {
			if s == k {
				return MatcherConfig{Kind: s}, true
			}
		}
		d.fail(e.val, e.path, "unknown matcher %q; accepted: %s", s, accepted)
		return MatcherConfig{}, false
	}
	o := d.object(e.val, e.path)
	if o == nil {
		return MatcherConfig{}, false
	}
	defer o.finish()
	kv, ok := o.take("pattern")
	if !ok {
		d.failAt(o.pos(), e.path, "a matcher mapping needs `pattern`; accepted: %s", accepted)
		return MatcherConfig{}, false
	}
	p, ok := d.str(kv)
	if !ok {
		return MatcherConfig{}, false
	}
	if _, err := regexp.Compile(p); err != nil {
		d.fail(kv.val, kv.path, "invalid regular expression: %s", err)
		return MatcherConfig{}, false
	}
	return MatcherConfig{Kind: "pattern", Pattern: p}, true
}

// String renders a backoff for humans: "exponential (base 2)".
func (b BackoffConfig) String() string {
	switch b.Kind {
	case BackoffLinear:
		return fmt.Sprintf("linear (increment %s)", b.Increment)
	case BackoffExponential:
		return fmt.Sprintf("exponential (base %g)", b.Base)
	case BackoffCustom:
		return fmt.Sprintf("custom (delays %v)", b.Delays)
	}
	return b.Kind
}
