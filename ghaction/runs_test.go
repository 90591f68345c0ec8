package ghaction

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-github/v60/github"
)

// A run object as the REST API returns it (trimmed).
const prRunJSON = `{
  "id": 30433642, "name": "example", "event": "pull_request", "path": ".github/workflows/example.yml",
  "run_attempt": 2, "status": "completed",
  "pull_requests": [{"number": 7, "head": {"ref": "feature"}, "base": {"ref": "main"}}],
  "repository": {"full_name": "o/r", "fork": false},
  "head_repository": {"full_name": "mallory/r", "fork": true}
}`

func TestGetRun(t *testing.T) {
	t.Parallel()
	gh, mux, _ := setupGitHub(t)
	mux.HandleFunc("/repos/o/r/actions/runs/30433642", func(w http.ResponseWriter, r *http.Request) {
		wantAuth(t, r)
		_, _ = io.WriteString(w, prRunJSON)
	})
	mux.HandleFunc("/repos/o/r/actions/runs/404", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, `{"message":"Not Found"}`)
	})
	mux.HandleFunc("/repos/o/r/actions/runs/403", func(w http.ResponseWriter, r *http.Request) { forbidden(w) })

	run, err := GetRun(context.Background(), gh, "o", "r", 30433642)
	if err != nil {
		t.Fatal(err)
	}
	want := RunInfo{ID: 30433642, Event: "pull_request", Path: ".github/workflows/example.yml", RunAttempt: 2,
		Repository: "o/r", HeadRepository: "mallory/r", HeadFork: true, PullRequests: []int{7}}
	if run.ID != want.ID || run.Event != want.Event || run.Path != want.Path || run.RunAttempt != want.RunAttempt ||
		run.Repository != want.Repository || run.HeadRepository != want.HeadRepository || !run.HeadFork || len(run.PullRequests) != 1 || run.PullRequests[0] != 7 {
		t.Errorf("run = %+v, want %+v", run, want)
	}

	_, err = GetRun(context.Background(), gh, "o", "r", 404)
	if !errors.Is(err, ErrNotFound) || err.Error() != "run 404 not found in o/r (or the token lacks `actions: read`): not found" {
		t.Errorf("404: %v", err)
	}
	_, err = GetRun(context.Background(), gh, "o", "r", 403)
	var pe *PermissionError
	if !errors.As(err, &pe) || pe.Permission != "actions: read" {
		t.Errorf("403: %v", err)
	}
	if _, err := GetRun(context.Background(), gh, "o", "r", 0); err == nil {
		t.Error("run 0 accepted")
	}
}

func TestCheckRunSource(t *testing.T) {
	t.Parallel()
	same := RunInfo{ID: 1, Repository: "O/R", HeadRepository: "o/r"}
	tests := map[string]struct {
		run       RunInfo
		allowFork bool
		wantErr   string
		wantWarn  string
	}{
		"same repository":        {run: same},
		"fork":                   {run: RunInfo{ID: 1, Repository: "o/r", HeadRepository: "m/r", HeadFork: true}, wantErr: "the run's code came from the fork m/r"},
		"other head, no flag":    {run: RunInfo{ID: 1, Repository: "o/r", HeadRepository: "m/r"}, wantErr: "fork m/r"},
		"fork flag, same name":   {run: RunInfo{ID: 1, Repository: "o/r", HeadRepository: "o/r", HeadFork: true}, wantErr: "fork o/r"},
		"no head repository":     {run: RunInfo{ID: 1, Repository: "o/r"}, wantErr: "head repository is unknown"},
		"fork allowed":           {run: RunInfo{ID: 1, Repository: "o/r", HeadRepository: "m/r", HeadFork: true}, allowFork: true, wantWarn: "allow-fork-artifacts is set"},
		"other repository":       {run: RunInfo{ID: 1, Repository: "x/r", HeadRepository: "x/r"}, wantErr: `belongs to "x/r", not to this repository o/r`},
		"other repository allow": {run: RunInfo{ID: 1, Repository: "x/r", HeadRepository: "x/r"}, allowFork: true, wantErr: "belongs to"},
	}
	for name, tc := range tests {
		warn, err := CheckRunSource(tc.run, "o", "r", tc.allowFork)
		switch {
		case tc.wantErr != "" && (err == nil || !errors.Is(err, ErrUntrustedRun) || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%s: err = %v, want %q", name, err, tc.wantErr)
		case tc.wantErr == "" && err != nil:
			t.Errorf("%s: err = %v", name, err)
		case !strings.Contains(warn, tc.wantWarn) || (tc.wantWarn == "" && warn != ""):
			t.Errorf("%s: warning = %q, want %q", name, warn, tc.wantWarn)
		}
	}
}

func TestListRunArtifactsPages(t *testing.T) {
	t.Parallel()
	gh, mux, srv := setupGitHub(t)
	mux.HandleFunc("/repos/o/r/actions/runs/5/artifacts", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("page") == "2" {
			_, _ = io.WriteString(w, `{"total_count":2,"artifacts":[{"id":2,"name":"b","expired":true}]}`)
			return
		}
		w.Header().Set("Link", `<`+srv.URL+baseURLPath+`/repos/o/r/actions/runs/5/artifacts?page=2>; rel="next"`)
		_, _ = io.WriteString(w, `{"total_count":2,"artifacts":[{"id":1,"name":"a"}]}`)
	})
	arts, err := ListRunArtifacts(context.Background(), gh, "o", "r", 5)
	if err != nil || len(arts) != 2 || arts[0].GetName() != "a" || !arts[1].GetExpired() {
		t.Fatalf("arts = %v, %v", arts, err)
	}
	_, err = ListRunArtifacts(context.Background(), gh, "o", "r", 6)
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "run 6 not found in o/r") {
		t.Errorf("404: %v", err)
	}
}

func TestDescribeExpired(t *testing.T) {
	t.Parallel()
	created := github.Timestamp{Time: time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)}
	expires := github.Timestamp{Time: time.Date(2026, 1, 31, 9, 0, 0, 0, time.UTC)}
	a := &github.Artifact{Name: github.String("dlq-5-1"), CreatedAt: &created, ExpiresAt: &expires}
	if got := DescribeExpired(a); got != "artifact dlq-5-1 expired on 2026-01-31 (retention 30 days)" {
		t.Errorf("DescribeExpired = %q", got)
	}
	if got := DescribeExpired(&github.Artifact{Name: github.String("x")}); got != "artifact x has expired" {
		t.Errorf("no dates: %q", got)
	}
}
