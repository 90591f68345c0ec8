// Package config reads MapReduce workflow files (Prodigy-compatible YAML)
// into a validated Workflow.
//
// Decoding walks the goccy/go-yaml AST, so every problem — YAML syntax, an
// unknown key, a wrong type, a bad duration or enum value — is reported as
// "file:line:col: key: message", and all problems of a file are reported
// together. Anchors, aliases and `<<` merge keys are supported. Unknown keys
// are errors everywhere; Prodigy keys this tool does not implement are
// rejected with an explanation rather than silently ignored.
//
// Retry settings (`retry_config`, or `retry` on a step) accept both
// spellings of the seed backoff-strategies.md:
//
//	backoff: exponential | fixed | fibonacci          (simple form; uses initial_delay)
//	backoff: {exponential: {base: 2.0}}               (retry_v2 form)
//	backoff: {linear: {increment: 2s}}
//	backoff: {custom: {delays: [500ms, 1s, 2s]}}
//	backoff: {fixed: {delay: 5s}}                     (error_policy forms: the explicit
//	backoff: {linear: {initial: 1s, increment: 2s}}    initial/delay sets initial_delay,
//	backoff: {exponential: {initial: 1s, multiplier: 2.0}}  multiplier is an alias of base)
//	backoff: {fibonacci: {initial: 1s}}
//
// `retry_config` may sit under map, map.error_policy or the top-level
// error_policy; map-level settings beat top-level ones, and a setting
// written twice at the same level is an error. Durations are Go-style
// strings ("500ms", "2s", "1h30m"); plain numbers are seconds only for a
// step's `timeout` and `agent_timeout_secs`.
//
// `on_item_failure` is dlq (default), retry, skip, stop, or
// `{custom: [steps]}` whose steps (a string, a step mapping or a list, as
// for on_failure) form ErrorPolicy.CustomHandler.
package config
