package config

import (
	"github.com/goccy/go-yaml/ast"
)

// setting is one error-policy value and where it was written.
type setting[T any] struct {
	set  bool
	v    T
	at   ast.Node
	path string
}

// policySrc holds the error-policy settings found at one place of the file.
type policySrc struct {
	onItemFailure     setting[string]
	custom            []Step
	continueOnFailure setting[bool]
	maxFailures       setting[int]
	failureThreshold  setting[float64]
	circuitBreaker    setting[int]
	retry             setting[*RetryConfig]
}

var itemFailureActions = []string{OnFailureDLQ, OnFailureRetry, OnFailureSkip, OnFailureStop}

// policyFields takes the keys shared by an error_policy block and the
// convenience keys at the top level and under map.
func (d *decoder) policyFields(o *object, src *policySrc) {
	if kv, ok := o.take("on_item_failure"); ok {
		if v, custom, ok := d.onItemFailure(kv); ok {
			src.onItemFailure = setting[string]{true, v, kv.keyNode, kv.path}
			src.custom = custom
		}
	}
	if kv, ok := o.take("continue_on_failure"); ok {
		if v, ok := d.boolean(kv); ok {
			src.continueOnFailure = setting[bool]{true, v, kv.keyNode, kv.path}
		}
	}
	if kv, ok := o.take("max_failures"); ok {
		if v, ok := d.integer(kv, 0); ok {
			src.maxFailures = setting[int]{true, v, kv.keyNode, kv.path}
		}
	}
	if kv, ok := o.take("failure_threshold"); ok {
		if v, ok := d.number(kv); ok {
			if v < 0 || v > 1 {
				d.fail(kv.val, kv.path, "must be a failure rate between 0 and 1, got %v", v)
			} else {
				src.failureThreshold = setting[float64]{true, v, kv.keyNode, kv.path}
			}
		}
	}
	if kv, ok := o.take("circuit_breaker"); ok {
		if v, ok := d.circuitBreaker(kv); ok {
			src.circuitBreaker = setting[int]{true, v, kv.keyNode, kv.path}
		}
	}
	if kv, ok := o.take("error_collection"); ok {
		d.errorCollection(kv)
	}
}

// circuitBreaker decodes `circuit_breaker: N` (trip after N consecutive
// finished items failing with one error signature), `false` (off; true is
// the default) or `{consecutive: N}`.
func (d *decoder) circuitBreaker(e entry) (int, bool) {
	switch v := d.value(e.val).(type) {
	case *ast.BoolNode:
		if v.Value {
			return DefaultCircuitBreaker, true
		}
		return 0, true
	case *ast.MappingNode:
		o := d.object(e.val, e.path)
		defer o.finish()
		kv, ok := o.take("consecutive")
		if !ok {
			d.fail(e.val, e.path, "a mapping here must be {consecutive: N}")
			return 0, false
		}
		return d.breakerCount(kv)
	}
	return d.breakerCount(e)
}

func (d *decoder) breakerCount(e entry) (int, bool) {
	n, ok := d.integer(e, 0)
	if !ok {
		return 0, false
	}
	if n == 1 {
		d.fail(e.val, e.path, "must be at least 2 (one failure is not a storm; use on_item_failure: stop or max_failures: 1), or 0/false for off")
		return 0, false
	}
	return n, true
}

// retryField takes a retry_config key of o into src.
func (d *decoder) retryField(o *object, src *policySrc) {
	if kv, ok := o.take("retry_config"); ok {
		if rc := d.retryConfig(kv); rc != nil {
			src.retry = setting[*RetryConfig]{true, rc, kv.keyNode, kv.path}
		}
	}
}

// errorPolicyBlock decodes an `error_policy:` mapping.
func (d *decoder) errorPolicyBlock(e entry) policySrc {
	var src policySrc
	o := d.object(e.val, e.path)
	if o == nil {
		return src
	}
	d.policyFields(o, &src)
	d.retryField(o, &src)
	o.finish()
	return src
}

// onItemFailure decodes dlq|retry|skip|stop or {custom: steps}.
func (d *decoder) onItemFailure(e entry) (string, []Step, bool) {
	const forms = "dlq, retry, skip, stop, or {custom: [steps]}"
	if _, isMap := d.value(e.val).(*ast.MappingNode); isMap {
		o := d.object(e.val, e.path)
		defer o.finish()
		kv, ok := o.take(OnFailureCustom)
		if !ok {
			d.fail(e.val, e.path, "a mapping here must be {custom: [steps]}; accepted: %s", forms)
			return "", nil, false
		}
		steps := d.onFailure(kv)
		if len(steps) == 0 {
			d.fail(kv.val, kv.path, "the custom handler needs at least one step")
			return "", nil, false
		}
		return OnFailureCustom, steps, true
	}
	v, ok := d.str(e)
	if !ok {
		return "", nil, false
	}
	for _, a := range itemFailureActions {
		if v == a {
			return v, nil, true
		}
	}
	if v == OnFailureCustom {
		d.fail(e.val, e.path, "custom needs handler steps: on_item_failure: {custom: [{shell: \"...\"}]}")
		return "", nil, false
	}
	d.fail(e.val, e.path, "unknown action %q; accepted: %s", v, forms)
	return "", nil, false
}

// errorCollection accepts Prodigy's default `aggregate` (errors are
// collected and reported at the end, which is what this tool does) and
// rejects the modes it does not implement.
func (d *decoder) errorCollection(e entry) {
	v, ok := d.str(e)
	if ok && v != "aggregate" {
		d.fail(e.val, e.path, "only `aggregate` is supported (errors are collected and reported at the end), got %q", v)
	}
}

// sameLevel combines two sources of one level (say map.X and
// map.error_policy.X); a setting written in both is an error.
func (d *decoder) sameLevel(a, b policySrc) policySrc {
	pick(d, &a.onItemFailure, b.onItemFailure)
	if b.onItemFailure.set && b.custom != nil {
		a.custom = b.custom
	}
	pick(d, &a.continueOnFailure, b.continueOnFailure)
	pick(d, &a.maxFailures, b.maxFailures)
	pick(d, &a.failureThreshold, b.failureThreshold)
	pick(d, &a.circuitBreaker, b.circuitBreaker)
	pick(d, &a.retry, b.retry)
	return a
}

func pick[T any](d *decoder, dst *setting[T], src setting[T]) {
	if !src.set {
		return
	}
	if dst.set {
		d.fail(src.at, src.path, "also set at %s (%s): keep only one", dst.path, d.pos(dst.at))
		return
	}
	*dst = src
}

// resolvePolicy applies precedence (map level beats top level) and the
// defaults.
func resolvePolicy(mapLevel, top policySrc) ErrorPolicy {
	p := ErrorPolicy{OnItemFailure: OnFailureDLQ, ContinueOnFailure: true, CircuitBreaker: DefaultCircuitBreaker}
	for _, src := range []policySrc{top, mapLevel} { // later wins
		if src.onItemFailure.set {
			p.OnItemFailure, p.CustomHandler = src.onItemFailure.v, src.custom
		}
		if src.continueOnFailure.set {
			p.ContinueOnFailure = src.continueOnFailure.v
		}
		if src.maxFailures.set {
			p.MaxFailures = src.maxFailures.v
		}
		if src.failureThreshold.set {
			p.FailureThreshold = src.failureThreshold.v
		}
		if src.circuitBreaker.set {
			p.CircuitBreaker = src.circuitBreaker.v
		}
		if src.retry.set {
			p.Retry = src.retry.v
		}
	}
	return p
}
