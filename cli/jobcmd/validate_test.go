package jobcmd_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/prodigy-action/prodigy-action/cli/clitest"

	"github.com/prodigy-action/prodigy-action/validate"
)

// validateCLI runs `action validate args...` in-process.
func validateCLI(t *testing.T, env map[string]string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	if env == nil {
		env = map[string]string{}
	}
	if _, ok := env["PRODIGY_HOME"]; !ok {
		env["PRODIGY_HOME"] = t.TempDir()
	}
	return clitest.Run{Env: env}.Exec(append([]string{"validate"}, args...)...)
}

func validateJSON(t *testing.T, env map[string]string, path string) (int, validate.Result) {
	t.Helper()
	code, out, errs := validateCLI(t, env, "--json", path)
	var r validate.Result
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("stdout is not one JSON object: %v\nstdout: %s\nstderr: %s", err, out, errs)
	}
	return code, r
}

func testdata(name string) string { return filepath.Join("..", "..", "config", "testdata", name) }

// TestValidateSeedSchedules prints the seed's Behavior lines as
// retry_schedule_ms for every spelling in config/testdata.
func TestValidateSeedSchedules(t *testing.T) {
	t.Parallel()
	tests := []struct {
		file      string
		schedule  []int64
		worstCase int64
	}{
		{"seed-fixed-simple.yml", []int64{2000, 2000}, 4000},
		{"seed-fixed-explicit.yml", []int64{5000, 5000}, 10000},
		{"seed-linear-v2.yml", []int64{1000, 3000, 5000}, 9000},
		{"seed-linear-policy.yml", []int64{1000, 3000, 5000}, 9000},
		{"seed-exponential-v2.yml", []int64{1000, 2000, 4000, 8000, 16000}, 31000},
		{"seed-exponential-policy.yml", []int64{1000, 2000, 4000, 8000, 16000}, 31000},
		{"seed-exponential-simple.yml", []int64{1000, 2000, 4000, 8000, 10000}, 25000},        // max_delay 10s caps retry 5
		{"seed-exponential-capped.yml", []int64{1000, 2000, 4000, 8000, 16000, 30000}, 61000}, // default 30s cap
		{"seed-fibonacci-simple.yml", []int64{1000, 1000, 2000, 3000, 5000, 8000}, 20000},
		{"seed-fibonacci-policy.yml", []int64{1000, 1000, 2000, 3000, 5000, 8000}, 20000},
		{"seed-custom.yml", []int64{500, 1000, 2000, 5000, 10000, 30000, 30000}, 78500}, // past the list: max_delay
		{"seed-custom-empty.yml", []int64{20000, 20000}, 40000},                         // empty list: max_delay
		{"seed-retryconfig-fields.yml", []int64{1000, 2000}, 1300 + 2600},               // jitter 0.3 upper bound
		{"seed-mapreduce-example.yml", []int64{1000, 1000, 2000, 3000}, 1300 + 1300 + 2600 + 3900},
		{"full.yml", []int64{}, 0}, // no retry_config: one attempt
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			t.Parallel()
			code, r := validateJSON(t, nil, testdata(tt.file))
			if code != 0 || !r.Valid || len(r.Errors) != 0 {
				t.Fatalf("exit %d, valid %v, errors %q", code, r.Valid, r.Errors)
			}
			if r.RetryScheduleMS == nil || !slices.Equal(r.RetryScheduleMS, tt.schedule) {
				t.Errorf("retry_schedule_ms = %v, want %v", r.RetryScheduleMS, tt.schedule)
			}
			if r.WorstCaseRetryMS != tt.worstCase {
				t.Errorf("worst_case_retry_ms = %d, want %d", r.WorstCaseRetryMS, tt.worstCase)
			}
			if len(tt.schedule) > 0 && (r.Retry == nil || r.Retry.Attempts != len(tt.schedule)+1) {
				t.Errorf("retry = %+v, want attempts %d", r.Retry, len(tt.schedule)+1)
			}
		})
	}
}

func TestValidateJSONShape(t *testing.T) {
	t.Parallel()
	_, out, _ := validateCLI(t, nil, "--json", testdata("top-level-error-policy.yml"))
	var m map[string]any
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"valid", "errors", "warnings", "retry", "retry_schedule_ms", "worst_case_retry_ms"} {
		if _, ok := m[k]; !ok {
			t.Errorf("--json output lacks %q: %s", k, out)
		}
	}
	retry := m["retry"].(map[string]any)
	if retry["backoff"] != "linear" || retry["increment_ms"] != 500.0 || retry["retry_budget_ms"] != 120000.0 ||
		len(retry["retry_on"].([]any)) != 5 {
		t.Errorf("retry = %v", retry)
	}
}

func TestValidateInvalid(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	base := "map:\n  input: items.json\n  agent_template: [{shell: x}]\n  retry_config:\n"
	tests := []struct {
		name string
		file string
		want []string
	}{
		{"words duration", write("a.yml", base+"    initial_delay: 1 second\n"),
			[]string{"a.yml:5:20: map.retry_config.initial_delay: invalid duration \"1 second\""}},
		{"bare number", write("b.yml", base+"    max_delay: 500\n"),
			[]string{"b.yml:5:16: map.retry_config.max_delay: invalid duration 500: a bare number has no unit"}},
		{"minutes", write("c.yml", base+"    retry_budget: 2 minutes\n"),
			[]string{"c.yml:5:19: map.retry_config.retry_budget: invalid duration \"2 minutes\""}},
		{"unknown key", write("d.yml", base+"    attempts: 2\n    backof: fixed\n"),
			[]string{"d.yml:6:5: map.retry_config.backof: unknown key \"backof\""}},
		{"two problems", write("e.yml", "nmae: x\n"+base+"    jitter_factor: 3\n"),
			[]string{"e.yml:1:1: nmae: unknown key", "e.yml:6:20: map.retry_config.jitter_factor: must be between 0 and 1"}},
		{"missing file", filepath.Join(dir, "nope.yml"), []string{"read workflow: open ", "no such file"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			code, r := validateJSON(t, nil, tt.file)
			if code != 2 || r.Valid {
				t.Fatalf("exit %d, valid %v; want exit 2 and valid false", code, r.Valid)
			}
			joined := strings.Join(r.Errors, "\n")
			for _, w := range tt.want {
				if !strings.Contains(joined, w) {
					t.Errorf("errors %q\nlack %q", r.Errors, w)
				}
			}
			if r.RetryScheduleMS == nil || len(r.RetryScheduleMS) != 0 {
				t.Errorf("retry_schedule_ms = %v, want []", r.RetryScheduleMS)
			}
			// The human form reports the same errors on stderr, nothing on stdout.
			code, out, errs := validateCLI(t, nil, tt.file)
			if code != 2 || out != "" || !strings.Contains(errs, tt.want[0]) {
				t.Errorf("human form: exit %d, stdout %q, stderr %q", code, out, errs)
			}
		})
	}
}

func TestValidateUsage(t *testing.T) {
	t.Parallel()
	if code, _, _ := validateCLI(t, nil); code != 2 {
		t.Errorf("validate without a file: exit %d, want 2", code)
	}
}

func TestValidateHumanOutput(t *testing.T) {
	t.Parallel()
	code, out, errs := validateCLI(t, nil, testdata("seed-exponential-capped.yml"))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{
		"seed-exponential-capped.yml: valid",
		"7 attempts, exponential ×2, initial_delay 1s, max_delay 30s, jitter off",
		"waits before retries 1..6: 1s, 2s, 4s, 8s, 16s, 30s (worst case: 1m1s)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
}

func TestValidateTimeoutWarnings(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	wf := filepath.Join(dir, "wf.yml")
	src := `map:
  input: items.json
  agent_timeout_secs: 20
  agent_template: [{shell: x}]
  retry_config:
    attempts: 6
    backoff: fibonacci
    initial_delay: 4s
`
	if err := os.WriteFile(wf, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	_, r := validateJSON(t, nil, wf)
	// waits 4+4+8+12+20 = 48s > 20s agent timeout
	if !r.Valid || len(r.Warnings) != 1 || !strings.Contains(r.Warnings[0], "worst-case retry backoff (48s) exceeds the agent timeout (20s)") {
		t.Errorf("warnings = %q", r.Warnings)
	}
	long := filepath.Join(dir, "long.yml")
	src = strings.Replace(src, "agent_timeout_secs: 20", "agent_timeout_secs: 7200", 1)
	if err := os.WriteFile(long, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, r := validateJSON(t, nil, long); len(r.Warnings) != 0 {
		t.Errorf("outside GitHub Actions: warnings = %q, want none", r.Warnings)
	}
	_, r = validateJSON(t, map[string]string{"GITHUB_ACTIONS": "true"}, long)
	if len(r.Warnings) != 1 || !strings.Contains(r.Warnings[0], "6 attempts × agent timeout 2h0m0s + backoff 48s") ||
		!strings.Contains(r.Warnings[0], "GitHub's 6h0m0s job limit") {
		t.Errorf("in GitHub Actions: warnings = %q", r.Warnings)
	}
}

func TestValidateDefaultRetryForOnItemFailureRetry(t *testing.T) {
	t.Parallel()
	wf := filepath.Join(t.TempDir(), "wf.yml")
	if err := os.WriteFile(wf, []byte("on_item_failure: retry\nmap:\n  input: x\n  agent_template: [{shell: x}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, r := validateJSON(t, nil, wf)
	if r.Retry == nil || r.Retry.Source != "default" || !slices.Equal(r.RetryScheduleMS, []int64{1000, 2000}) {
		t.Errorf("retry = %+v, schedule %v; want the seed defaults", r.Retry, r.RetryScheduleMS)
	}
}

// TestValidateItemsPipelineErrors: what config leaves to the items
// pipeline (filter, json_path) is checked by the same entry point.
func TestValidateItemsPipelineErrors(t *testing.T) {
	t.Parallel()
	wf := filepath.Join(t.TempDir(), "wf.yml")
	if err := os.WriteFile(wf, []byte("map:\n  input: x.json\n  filter: \"a >>> 1\"\n  agent_template: [{shell: x}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, r := validateJSON(t, nil, wf)
	if code != 2 || r.Valid || len(r.Errors) != 1 || !strings.Contains(r.Errors[0], "wf.yml:3:") || !strings.Contains(r.Errors[0], "map.filter") {
		t.Errorf("exit %d, errors %q", code, r.Errors)
	}
}
