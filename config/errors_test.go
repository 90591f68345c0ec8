package config_test

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/prodigy-action/prodigy-action/config"
)

// wrap puts lines under map.retry_config of an otherwise valid workflow;
// the first wrapped line is line 5.
func wrap(lines ...string) string {
	return "map:\n  input: items.json\n  agent_template: [{shell: x}]\n  retry_config:\n" + strings.Join(lines, "\n") + "\n"
}

func TestParseErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		src  string
		want []string // each error, as a substring, in order
	}{
		{"bad duration with words", wrap("    initial_delay: 1 second"),
			[]string{`wf.yml:5:20: map.retry_config.initial_delay: invalid duration "1 second": use a number followed by a unit`}},
		{"bad duration two words", wrap("    max_delay: 2 minutes"),
			[]string{`wf.yml:5:16: map.retry_config.max_delay: invalid duration "2 minutes"`}},
		{"bare number delay", wrap("    initial_delay: 500"),
			[]string{`wf.yml:5:20: map.retry_config.initial_delay: invalid duration 500: a bare number has no unit (write 500ms or 500s)`}},
		{"bare number in custom delays", wrap("    backoff: {custom: {delays: [1s, 500]}}"),
			[]string{`wf.yml:5:37: map.retry_config.backoff.custom.delays[1]: invalid duration 500`}},
		{"quoted bare number", wrap(`    retry_budget: "30"`),
			[]string{`wf.yml:5:19: map.retry_config.retry_budget: invalid duration "30": a bare number has no unit`}},
		{"negative duration", wrap("    initial_delay: -1s"),
			[]string{`map.retry_config.initial_delay: invalid duration "-1s"`}},
		{"unknown key in retry_config", wrap("    attempt: 3"),
			[]string{`wf.yml:5:5: map.retry_config.attempt: unknown key "attempt"; accepted keys here: attempts, backoff, initial_delay, jitter, jitter_factor, max_attempts, max_delay, retry_budget, retry_on`}},
		{"unknown top-level key", "nmae: x\n" + wrap("    attempts: 2"),
			[]string{`wf.yml:1:1: nmae: unknown key "nmae"; accepted keys here:`}},
		{"unsupported prodigy key", "merge: [{shell: x}]\n" + wrap("    attempts: 2"),
			[]string{"wf.yml:1:1: merge: Prodigy's `merge` workflow is not supported"}},
		{"step retry_config is rejected", "map:\n  input: x\n  agent_template:\n    - shell: x\n      retry_config: {attempts: 2}\n",
			[]string{"wf.yml:5:7: map.agent_template[0].retry_config: `retry_config` does not belong here"}},
		{"attempts and max_attempts", wrap("    attempts: 2", "    max_attempts: 3"),
			[]string{`wf.yml:6:5: map.retry_config.max_attempts: max_attempts is an alias of attempts: set only one`}},
		{"attempts zero", wrap("    attempts: 0"), []string{`wf.yml:5:15: map.retry_config.attempts: must be at least 1, got 0`}},
		{"attempts negative", wrap("    attempts: -2"), []string{`map.retry_config.attempts: must be at least 1, got -2`}},
		{"attempts not a number", wrap("    attempts: three"), []string{`map.retry_config.attempts: must be a whole number, got a string`}},
		{"jitter factor out of range", wrap("    jitter_factor: 1.5"),
			[]string{`wf.yml:5:20: map.retry_config.jitter_factor: must be between 0 and 1, got 1.5`}},
		{"jitter not bool", wrap("    jitter: yes please"), []string{`map.retry_config.jitter: must be true or false`}},
		{"max_delay zero", wrap("    max_delay: 0s"), []string{`map.retry_config.max_delay: must be positive`}},
		{"unknown backoff name", wrap("    backoff: quadratic"),
			[]string{`wf.yml:5:14: map.retry_config.backoff: unknown backoff "quadratic"; accepted: backoff: exponential|fixed|fibonacci`}},
		{"linear without increment", wrap("    backoff: linear"), []string{`linear needs an increment`}},
		{"linear mapping without increment", wrap("    backoff: {linear: {initial: 1s}}"),
			[]string{`map.retry_config.backoff.linear: missing increment`}},
		{"custom without delays", wrap("    backoff: custom"), []string{`custom needs its delays`}},
		{"two strategies", wrap("    backoff: {fixed: {}, linear: {increment: 1s}}"),
			[]string{`map.retry_config.backoff: must name exactly one strategy`}},
		{"unknown key inside strategy", wrap("    backoff: {exponential: {factor: 3}}"),
			[]string{`map.retry_config.backoff.exponential.factor: unknown key "factor"; accepted keys here: base, initial, multiplier`}},
		{"base and multiplier", wrap("    backoff: {exponential: {base: 2, multiplier: 3}}"),
			[]string{`multiplier is an alias of base: set only one`}},
		{"base below one", wrap("    backoff: {exponential: {base: 0.5}}"), []string{`must be at least 1`}},
		{"initial twice", wrap("    initial_delay: 1s", "    backoff: {fibonacci: {initial: 2s}}"),
			[]string{`wf.yml:6:27: map.retry_config.backoff: sets the initial delay, and so does initial_delay: keep only one`}},
		{"bad matcher", wrap("    retry_on: [network, flaky]"),
			[]string{`wf.yml:5:25: map.retry_config.retry_on[1]: unknown matcher "flaky"; accepted: network, timeout, server_error, rate_limit, or {pattern: REGEX}`}},
		{"bad regex", wrap(`    retry_on: [{pattern: "(unclosed"}]`),
			[]string{`map.retry_config.retry_on[0].pattern: invalid regular expression`}},
		{"retry_budget zero", wrap("    retry_budget: 0s"), []string{`must be positive (omit it for no budget)`}},
		{"syntax error", "map:\n  input: [a, b\n  x: y\n", []string{`wf.yml:3:3: invalid YAML:`}},
		{"duplicate key", "map:\n  input: a\n  input: b\n", []string{`wf.yml:3:3: invalid YAML: mapping key "input" already defined`}},
		{"empty file", "", []string{`wf.yml:1:1: the workflow file is empty`}},
		{"two documents", "map: {}\n---\nmap: {}\n", []string{`a workflow file holds one YAML document`}},
		{"not a mapping", "- a\n- b\n", []string{`wf.yml:1:1: must be a mapping`}},
		{"missing map", "name: x\n", []string{`wf.yml:1:1: map: missing`}},
		{"missing input and template", "map:\n  json_path: $\n",
			[]string{`wf.yml:1:1: map.input: missing`, `wf.yml:1:1: map.agent_template: missing`}},
		{"empty agent template", "map:\n  input: x\n  agent_template: []\n",
			[]string{`wf.yml:3:19: map.agent_template: must hold at least one step`}},
		{"mode", "mode: sequential\n" + wrap("    attempts: 2"), []string{`wf.yml:1:7: mode: only mode: mapreduce is supported`}},
		{"step with two kinds", "map:\n  input: x\n  agent_template:\n    - shell: a\n      claude: b\n",
			[]string{`wf.yml:4:7: map.agent_template[0]: a step needs exactly one of shell, claude or write_file (found 2)`}},
		{"step with no kind", "map:\n  input: x\n  agent_template:\n    - name: nothing\n",
			[]string{`a step needs exactly one of shell, claude or write_file (found 0)`}},
		{"step as string", "map:\n  input: x\n  agent_template:\n    - make test\n",
			[]string{`wf.yml:4:7: map.agent_template[0]: a step must be a mapping such as {shell: "make test"}, got a string`}},
		{"step timeout words", "map:\n  input: x\n  agent_template:\n    - shell: a\n      timeout: 5 minutes\n",
			[]string{`wf.yml:5:16: map.agent_template[0].timeout: invalid duration "5 minutes"`}},
		{"step timeout float", "map:\n  input: x\n  agent_template:\n    - shell: a\n      timeout: 1.5\n",
			[]string{`must be whole seconds (300) or a duration (5m), got a number`}},
		{"bad capture name", "map:\n  input: x\n  agent_template:\n    - shell: a\n      capture_output: 1abc\n",
			[]string{`wf.yml:5:23: map.agent_template[0].capture_output: variable name "1abc" must be letters`}},
		{"bad capture var", "map:\n  input: x\n  agent_template:\n    - shell: a\n      capture_output: \"my var\"\n",
			[]string{`variable name "my var" must be letters`}},
		{"write_file without path", "map:\n  input: x\n  agent_template:\n    - write_file: {content: x}\n",
			[]string{`map.agent_template[0].write_file: missing path`}},
		{"write_file bad mode", "map:\n  input: x\n  agent_template:\n    - write_file: {path: a, mode: 999}\n",
			[]string{`map.agent_template[0].write_file.mode: must be an octal file mode`}},
		{"write_file format unsupported", "map:\n  input: x\n  agent_template:\n    - write_file: {path: a, format: json}\n",
			[]string{"`write_file.format` is not supported"}},
		{"on_failure bool", "map:\n  input: x\n  agent_template:\n    - shell: a\n      on_failure: true\n",
			[]string{`map.agent_template[0].on_failure: must be a command string, a step mapping`}},
		{"on_item_failure unknown", "on_item_failure: explode\n" + wrap("    attempts: 2"),
			[]string{`wf.yml:1:18: on_item_failure: unknown action "explode"; accepted: dlq, retry, skip, stop, or {custom: [steps]}`}},
		{"on_item_failure custom without steps", "on_item_failure: custom\n" + wrap("    attempts: 2"),
			[]string{`custom needs handler steps`}},
		{"failure threshold range", "error_policy:\n  failure_threshold: 1.2\n" + wrap("    attempts: 2"),
			[]string{`wf.yml:2:22: error_policy.failure_threshold: must be a failure rate between 0 and 1, got 1.2`}},
		{"max_failures negative", "max_failures: -1\n" + wrap("    attempts: 2"), []string{`max_failures: must be at least 0, got -1`}},
		{"circuit_breaker of one", "error_policy:\n  circuit_breaker: 1\n" + wrap("    attempts: 2"),
			[]string{`wf.yml:2:20: error_policy.circuit_breaker: must be at least 2`}},
		{"circuit_breaker word", "error_policy:\n  circuit_breaker: {consecutive: many}\n" + wrap("    attempts: 2"),
			[]string{`error_policy.circuit_breaker.consecutive: must be`}},
		{"circuit_breaker unknown key", "error_policy:\n  circuit_breaker: {window: 5}\n" + wrap("    attempts: 2"),
			[]string{`error_policy.circuit_breaker: a mapping here must be {consecutive: N}`, `circuit_breaker.window: unknown key "window"; accepted keys here: consecutive`}},
		{"error_collection immediate", "error_policy:\n  error_collection: immediate\n" + wrap("    attempts: 2"),
			[]string{"only `aggregate` is supported"}},
		{"same level twice", wrap("    attempts: 2") + "  error_policy:\n    retry_config: {attempts: 3}\n",
			[]string{`wf.yml:4:3: map.retry_config: also set at map.error_policy.retry_config (wf.yml:7:5): keep only one`}},
		{"max_parallel zero", "map:\n  input: x\n  max_parallel: 0\n  agent_template: [{shell: x}]\n",
			[]string{`wf.yml:3:17: map.max_parallel: must be at least 1, got 0`}},
		{"max_parallel text", "map:\n  input: x\n  max_parallel: lots\n  agent_template: [{shell: x}]\n",
			[]string{`map.max_parallel: must be a positive number or an environment reference`}},
		{"offset negative", "map:\n  input: x\n  offset: -1\n  agent_template: [{shell: x}]\n",
			[]string{`map.offset: must be at least 0, got -1`}},
		{"agent timeout twice", "map:\n  input: x\n  agent_timeout_secs: 5\n  timeout_config: {agent_timeout_secs: 6}\n  agent_template: [{shell: x}]\n",
			[]string{`map.timeout_config.agent_timeout_secs: also set at map.agent_timeout_secs (wf.yml:3:3)`}},
		{"timeout_config unsupported key", "map:\n  input: x\n  timeout_config: {timeout_action: dlq}\n  agent_template: [{shell: x}]\n",
			[]string{"map.timeout_config.timeout_action: `timeout_config.timeout_action` is not supported"}},
		{"env nested value", "env:\n  A: {b: c}\n" + wrap("    attempts: 2"),
			[]string{`wf.yml:2:6: env.A: must be a single value (string, number or boolean), got a mapping`}},
		{"several errors in file order", wrap("    max_delay: 5 s", "    attempts: 0", "    bogus: 1"),
			[]string{`wf.yml:5:16: map.retry_config.max_delay`, `wf.yml:6:15: map.retry_config.attempts`, `wf.yml:7:5: map.retry_config.bogus`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			w, err := config.Parse("wf.yml", []byte(tt.src))
			if err == nil {
				t.Fatalf("Parse succeeded (%+v), want errors %q", w, tt.want)
			}
			if w != nil {
				t.Error("a failed Parse must return a nil workflow")
			}
			errs := config.Errors(err)
			if len(errs) != len(tt.want) {
				t.Fatalf("got %d errors, want %d:\n%v", len(errs), len(tt.want), err)
			}
			for i, want := range tt.want {
				var ce *config.Error
				if !errors.As(errs[i], &ce) {
					t.Errorf("error %d is %T, want *config.Error", i, errs[i])
				}
				if !strings.Contains(errs[i].Error(), want) {
					t.Errorf("error %d = %q\nwant it to contain %q", i, errs[i], want)
				}
			}
		})
	}
}

func TestWarnings(t *testing.T) {
	t.Parallel()
	w, err := config.Parse("wf.yml", []byte(wrap("    initial_delay: 1m", "    max_delay: 10s")))
	if err != nil {
		t.Fatal(err)
	}
	if len(w.Warnings) != 1 || !strings.Contains(w.Warnings[0], "wf.yml:5:5: map.retry_config: initial_delay 1m0s exceeds max_delay 10s") {
		t.Errorf("warnings = %q", w.Warnings)
	}
}

func TestLoadMissingFile(t *testing.T) {
	t.Parallel()
	_, err := config.Load("testdata/does-not-exist.yml")
	if !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("err = %v, want os.ErrNotExist wrapped", err)
	}
}

func TestErrorFormat(t *testing.T) {
	t.Parallel()
	e := &config.Error{Pos: config.Position{File: "a.yml", Line: 3, Col: 7}, Key: "map.input", Msg: "bad"}
	if got := e.Error(); got != "a.yml:3:7: map.input: bad" {
		t.Errorf("Error() = %q", got)
	}
	if got := (&config.Error{Pos: config.Position{File: "a.yml", Line: 1, Col: 1}, Msg: "invalid YAML"}).Error(); got != "a.yml:1:1: invalid YAML" {
		t.Errorf("Error() without key = %q", got)
	}
	if got := config.Errors(nil); got != nil {
		t.Errorf("Errors(nil) = %v", got)
	}
}
