package validate_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/prodigy-action/prodigy-action/config"
	"github.com/prodigy-action/prodigy-action/validate"
)

func writeWorkflow(t *testing.T, src string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "wf.yml")
	if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestItemRetryConfigRule(t *testing.T) {
	t.Parallel()
	rc, src := validate.ItemRetryConfig(config.ErrorPolicy{OnItemFailure: config.OnFailureRetry})
	if rc == nil || src != validate.RetrySourceDefault || rc.Attempts != config.DefaultRetryConfig().Attempts {
		t.Errorf("retry without config = %+v, %s; want the defaults", rc, src)
	}
	if rc, src := validate.ItemRetryConfig(config.ErrorPolicy{OnItemFailure: config.OnFailureDLQ}); rc != nil || src != validate.RetrySourceWorkflow {
		t.Errorf("dlq without config = %+v, %s; want none", rc, src)
	}
	own := &config.RetryConfig{Attempts: 7}
	if rc, _ := validate.ItemRetryConfig(config.ErrorPolicy{OnItemFailure: config.OnFailureRetry, Retry: own}); rc != own {
		t.Errorf("the workflow's config must win, got %+v", rc)
	}
}

func TestValidateFile(t *testing.T) {
	t.Parallel()
	v := validate.File(writeWorkflow(t, "on_item_failure: retry\nmap:\n  input: x.json\n  agent_timeout_secs: 7200\n  agent_template: [{shell: x}]\n"), validate.Options{})
	if !v.Valid || v.Err() != nil || v.Workflow == nil || v.Retry.Source != validate.RetrySourceDefault ||
		!slices.Equal(v.RetryScheduleMS, []int64{1000, 2000}) || v.WorstCaseRetryMS != 3000 || v.Policy.Attempts != 3 {
		t.Errorf("valid workflow: %+v", v)
	}
	if len(v.Warnings) != 0 {
		t.Errorf("outside GitHub Actions: warnings %q", v.Warnings)
	}
	v = validate.File(v.File, validate.Options{GitHubActions: true})
	if len(v.Warnings) != 1 || !strings.Contains(v.Warnings[0], "job limit") {
		t.Errorf("3 × 2h in GitHub Actions: warnings %q", v.Warnings)
	}

	bad := validate.File(writeWorkflow(t, "map:\n  input: x.json\n  json_path: \"$[?(\"\n  agent_template: [{shell: x}]\n"), validate.Options{})
	var ue *validate.Error
	if bad.Valid || len(bad.Errors) != 1 || !errors.As(bad.Err(), &ue) || !strings.Contains(bad.Errors[0], "json_path") {
		t.Errorf("bad json_path: %+v, err %v", bad, bad.Err())
	}

	missing := validate.File(filepath.Join(t.TempDir(), "nope.yml"), validate.Options{})
	if missing.Valid || missing.Workflow != nil || !errors.As(missing.Err(), &ue) || !errors.Is(missing.Err(), os.ErrNotExist) {
		t.Errorf("missing file: %+v, err %v", missing, missing.Err())
	}
}
