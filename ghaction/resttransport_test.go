package ghaction

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-github/v60/github"

	"github.com/prodigy-action/prodigy-action/retry/retrytest"
)

var fakeNow = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

// retryingGitHub is setupGitHub with the retrying transport on a fake clock.
func retryingGitHub(t *testing.T, o RESTRetry) (*github.Client, *http.ServeMux, *retrytest.FakeClock) {
	t.Helper()
	mux := http.NewServeMux()
	api := http.NewServeMux()
	api.Handle(baseURLPath+"/", http.StripPrefix(baseURLPath, mux))
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	clock := retrytest.NewFakeClock(fakeNow)
	o.Clock = clock
	c := github.NewClient(WithRetry(srv.Client(), o)).WithAuthToken("ghs_secret_token")
	u, _ := url.Parse(srv.URL + baseURLPath + "/")
	c.BaseURL, c.UploadURL = u, u
	return c, mux, clock
}

// flaky answers the first len(fails) requests with fails[i] (status and
// headers) and then calls ok.
type flaky struct {
	mu    sync.Mutex
	fails []func(w http.ResponseWriter)
	hits  int
	ok    http.HandlerFunc
}

func (f *flaky) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.hits++
	n := f.hits
	f.mu.Unlock()
	if n <= len(f.fails) {
		f.fails[n-1](w)
		return
	}
	f.ok(w, r)
}

func status(code int, headers map[string]string, body string) func(w http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		for k, v := range headers {
			w.Header().Set(k, v)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_, _ = io.WriteString(w, body)
	}
}

func TestRetry429ThenCreatedComment(t *testing.T) {
	t.Parallel()
	gh, mux, clock := retryingGitHub(t, RESTRetry{})
	mux.HandleFunc("/repos/o/r/issues/3/comments", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode([]any{})
	})
	var bodies []string
	post := &flaky{
		fails: []func(http.ResponseWriter){status(http.StatusTooManyRequests, nil, `{"message":"slow down"}`)},
		ok: func(w http.ResponseWriter, r *http.Request) {
			var in struct{ Body string }
			_ = json.NewDecoder(r.Body).Decode(&in)
			bodies = append(bodies, in.Body)
			w.WriteHeader(http.StatusCreated)
			_ = json.NewEncoder(w).Encode(map[string]any{"id": 7, "body": in.Body})
		},
	}
	mux.HandleFunc("/repos/o/r/issues/3/comments/", http.NotFound)
	mux.Handle("POST /repos/o/r/issues/3/comments", post)
	mux.HandleFunc("GET /user", func(w http.ResponseWriter, r *http.Request) { forbidden(w) })

	res, err := UpsertStickyComment(context.Background(), gh, "o", "r", 3, "k", "", "hello")
	if err != nil {
		t.Fatal(err)
	}
	if !res.Created || res.CommentID != 7 || post.hits != 2 {
		t.Fatalf("result %+v after %d POSTs, want a created comment on the 2nd try", res, post.hits)
	}
	// The replayed POST carried the full body, not an empty one.
	if len(bodies) != 1 || !strings.HasPrefix(bodies[0], "hello") {
		t.Errorf("posted bodies %q", bodies)
	}
	if got := clock.Sleeps(); len(got) != 1 || got[0] != 2*time.Second {
		t.Errorf("sleeps %v, want [2s] (the default first backoff)", got)
	}
}

func TestRetry502ThenArtifactList(t *testing.T) {
	t.Parallel()
	gh, mux, clock := retryingGitHub(t, RESTRetry{})
	list := &flaky{
		fails: []func(http.ResponseWriter){status(http.StatusBadGateway, nil, "<html>bad gateway</html>")},
		ok: func(w http.ResponseWriter, r *http.Request) {
			_ = json.NewEncoder(w).Encode(map[string]any{"total_count": 1, "artifacts": []any{
				map[string]any{"id": 5, "name": "prodigy-dlq-9-1"}}})
		},
	}
	mux.Handle("/repos/o/r/actions/runs/9/artifacts", list)
	a, err := FindRunArtifact(context.Background(), gh, "o", "r", 9, "prodigy-dlq")
	if err != nil {
		t.Fatal(err)
	}
	if a.GetID() != 5 || list.hits != 2 || len(clock.Sleeps()) != 1 {
		t.Fatalf("artifact %d after %d tries and sleeps %v", a.GetID(), list.hits, clock.Sleeps())
	}
}

func TestRetryHonoursServerHints(t *testing.T) {
	t.Parallel()
	reset := fakeNow.Add(40 * time.Second)
	tests := []struct {
		name string
		fail func(http.ResponseWriter)
		want time.Duration
	}{
		{"Retry-After seconds", status(http.StatusTooManyRequests, map[string]string{"Retry-After": "17"}, `{}`), 17 * time.Second},
		{"Retry-After date", status(http.StatusServiceUnavailable, map[string]string{"Retry-After": fakeNow.Add(9 * time.Second).Format(http.TimeFormat)}, ``), 9 * time.Second},
		{"secondary limit with Retry-After", status(http.StatusForbidden, map[string]string{"Retry-After": "30"},
			`{"message":"You have exceeded a secondary rate limit."}`), 30 * time.Second},
		{"secondary limit without headers waits a minute", status(http.StatusForbidden, nil,
			`{"message":"You have exceeded a secondary rate limit. Please wait a few minutes before you try again."}`), time.Minute},
		{"primary limit waits for x-ratelimit-reset", status(http.StatusForbidden, map[string]string{
			"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": strconv.FormatInt(reset.Unix(), 10)},
			`{"message":"API rate limit exceeded"}`), 41 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			gh, mux, clock := retryingGitHub(t, RESTRetry{})
			h := &flaky{fails: []func(http.ResponseWriter){tt.fail}, ok: func(w http.ResponseWriter, r *http.Request) {
				_ = json.NewEncoder(w).Encode(map[string]any{"total_count": 0, "artifacts": []any{}})
			}}
			mux.Handle("/repos/o/r/actions/runs/9/artifacts", h)
			_, err := FindRunArtifact(context.Background(), gh, "o", "r", 9, "x")
			if !errors.Is(err, ErrNoArtifact) {
				t.Fatalf("err = %v, want ErrNoArtifact after the retry", err)
			}
			if got := clock.Sleeps(); len(got) != 1 || got[0] != tt.want || h.hits != 2 {
				t.Errorf("sleeps %v after %d tries, want [%s]", got, h.hits, tt.want)
			}
		})
	}
}

func TestRetryGivesUpWithinBudget(t *testing.T) {
	t.Parallel()
	t.Run("permission 403 is not retried", func(t *testing.T) {
		t.Parallel()
		gh, mux, clock := retryingGitHub(t, RESTRetry{})
		h := &flaky{fails: []func(http.ResponseWriter){forbidden, forbidden}, ok: nil}
		mux.Handle("/repos/o/r/actions/runs/9/artifacts", h)
		_, err := FindRunArtifact(context.Background(), gh, "o", "r", 9, "x")
		if !errors.Is(err, ErrForbidden) || h.hits != 1 || len(clock.Sleeps()) != 0 {
			t.Fatalf("err = %v after %d tries, sleeps %v; want one try and a PermissionError", err, h.hits, clock.Sleeps())
		}
	})
	t.Run("primary limit past the budget says when it resets", func(t *testing.T) {
		t.Parallel()
		gh, mux, clock := retryingGitHub(t, RESTRetry{Budget: time.Minute})
		reset := fakeNow.Add(45 * time.Minute)
		limit := status(http.StatusForbidden, map[string]string{
			"X-RateLimit-Limit": "1000", "X-RateLimit-Remaining": "0", "X-RateLimit-Reset": strconv.FormatInt(reset.Unix(), 10)},
			`{"message":"API rate limit exceeded for installation ID 1."}`)
		h := &flaky{fails: []func(http.ResponseWriter){limit, limit}}
		mux.Handle("/repos/o/r/actions/runs/9/artifacts", h)
		_, err := FindRunArtifact(context.Background(), gh, "o", "r", 9, "x")
		if !errors.Is(err, ErrRateLimited) || h.hits != 1 || len(clock.Sleeps()) != 0 {
			t.Fatalf("err = %v after %d tries, sleeps %v; want ErrRateLimited at once", err, h.hits, clock.Sleeps())
		}
		if !strings.Contains(err.Error(), "resets at "+reset.Format(time.RFC3339)) {
			t.Errorf("message does not say when the limit resets: %v", err)
		}
	})
	t.Run("429 with remaining 0 also says when it resets", func(t *testing.T) {
		t.Parallel()
		gh, mux, _ := retryingGitHub(t, RESTRetry{Attempts: 2})
		reset := fakeNow.Add(10 * time.Second)
		limit := status(http.StatusTooManyRequests, map[string]string{
			"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": strconv.FormatInt(reset.Unix(), 10)}, `{"message":"too many"}`)
		h := &flaky{fails: []func(http.ResponseWriter){limit, limit, limit}}
		mux.Handle("/repos/o/r/actions/runs/9/artifacts", h)
		_, err := FindRunArtifact(context.Background(), gh, "o", "r", 9, "x")
		if !errors.Is(err, ErrRateLimited) || h.hits != 2 || !strings.Contains(err.Error(), reset.Format(time.RFC3339)) {
			t.Fatalf("err = %v after %d tries", err, h.hits)
		}
	})
	t.Run("5xx until attempts run out returns GitHub's answer", func(t *testing.T) {
		t.Parallel()
		gh, mux, clock := retryingGitHub(t, RESTRetry{Attempts: 3})
		bad := status(http.StatusServiceUnavailable, nil, `{"message":"unicorns"}`)
		h := &flaky{fails: []func(http.ResponseWriter){bad, bad, bad, bad}}
		mux.Handle("/repos/o/r/actions/runs/9/artifacts", h)
		_, err := FindRunArtifact(context.Background(), gh, "o", "r", 9, "x")
		var er *github.ErrorResponse
		if !errors.As(err, &er) || er.Response.StatusCode != 503 || er.Message != "unicorns" || h.hits != 3 {
			t.Fatalf("err = %v after %d tries", err, h.hits)
		}
		if got := clock.Sleeps(); len(got) != 2 || got[0] != 2*time.Second || got[1] != 4*time.Second {
			t.Errorf("sleeps %v, want [2s 4s]", got)
		}
	})
	t.Run("Retry-After past the budget is not waited for", func(t *testing.T) {
		t.Parallel()
		gh, mux, clock := retryingGitHub(t, RESTRetry{Budget: 30 * time.Second})
		h := &flaky{fails: []func(http.ResponseWriter){status(http.StatusTooManyRequests, map[string]string{"Retry-After": "3600"}, `{}`)}}
		mux.Handle("/repos/o/r/actions/runs/9/artifacts", h)
		_, err := FindRunArtifact(context.Background(), gh, "o", "r", 9, "x")
		if err == nil || h.hits != 1 || len(clock.Sleeps()) != 0 {
			t.Fatalf("err = %v after %d tries, sleeps %v", err, h.hits, clock.Sleeps())
		}
	})
}

func TestRetryTransportErrors(t *testing.T) {
	t.Parallel()
	// A server that drops the first connection without answering.
	var mu sync.Mutex
	drops := 1
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		drop := drops > 0
		drops--
		mu.Unlock()
		if drop {
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
			return
		}
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(srv.Close)
	clock := retrytest.NewFakeClock(fakeNow)
	var retried []string
	c := WithRetry(&http.Client{Timeout: time.Minute}, RESTRetry{Clock: clock, OnRetry: func(m, u string, st int, err error, d time.Duration) {
		retried = append(retried, fmt.Sprintf("%s %d %s", m, st, d))
	}})
	if c.Timeout != time.Minute+3*time.Minute {
		t.Errorf("timeout %s, want the budget added", c.Timeout)
	}
	resp, err := c.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(data) != "ok" || len(retried) != 1 || retried[0] != "GET 0 2s" {
		t.Fatalf("body %q, retries %q", data, retried)
	}

	// A refused connection is retried until the attempts run out, then the
	// transport error is returned.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	clock2 := retrytest.NewFakeClock(fakeNow)
	c2 := WithRetry(nil, RESTRetry{Clock: clock2, Attempts: 3})
	if _, err := c2.Get("http://" + addr + "/"); err == nil || len(clock2.Sleeps()) != 2 {
		t.Fatalf("refused: err = %v, sleeps %v", err, clock2.Sleeps())
	}

	// A cancelled context is not retried.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	clock3 := retrytest.NewFakeClock(fakeNow)
	if _, err := WithRetry(nil, RESTRetry{Clock: clock3}).Do(req); err == nil || len(clock3.Sleeps()) != 0 {
		t.Fatalf("cancelled: err = %v, sleeps %v", err, clock3.Sleeps())
	}
}

func TestStickyCommentIgnoresOthersMarkers(t *testing.T) {
	t.Parallel()
	gh, mux, _ := setupGitHub(t)
	f := &fakeComments{nextID: 100}
	marker := CommentMarker("ci / fanout")
	// mallory pre-claims the sticky comment by quoting our marker.
	f.comments = append(f.comments,
		map[string]any{"id": int64(1), "body": "click here\n" + marker, "user": map[string]any{"login": "mallory"}},
		map[string]any{"id": int64(2), "body": "nit", "user": map[string]any{"login": "alice"}})
	f.register(t, mux, 4)
	userCalls := 0
	mux.HandleFunc("/user", func(w http.ResponseWriter, r *http.Request) {
		userCalls++
		forbidden(w) // the job token may not read /user
	})
	res, err := UpsertStickyComment(context.Background(), gh, "o", "r", 4, "ci / fanout", "", "results")
	if err != nil {
		t.Fatal(err)
	}
	if !res.Created || f.patches != 0 || f.posts != 1 || userCalls != 1 {
		t.Fatalf("result %+v (posts %d, patches %d, /user %d): want a new comment, mallory's untouched", res, f.posts, f.patches, userCalls)
	}
	if f.comments[0]["body"] != "click here\n"+marker {
		t.Errorf("mallory's comment was changed: %q", f.comments[0]["body"])
	}
	// The next run edits the bot's own comment, still not mallory's.
	if res, err := UpsertStickyComment(context.Background(), gh, "o", "r", 4, "ci / fanout", "", "again"); err != nil || res.Created || res.CommentID != 101 {
		t.Fatalf("second run: %+v, %v; want an edit of 101", res, err)
	}
}

func TestTokenLogin(t *testing.T) {
	t.Parallel()
	gh, mux, _ := setupGitHub(t)
	mux.HandleFunc("/user", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{"login": "octo-pat-user"})
	})
	if got, err := TokenLogin(context.Background(), gh); err != nil || got != "octo-pat-user" {
		t.Fatalf("PAT: %q, %v", got, err)
	}
	gh2, mux2, _ := setupGitHub(t)
	mux2.HandleFunc("/user", func(w http.ResponseWriter, r *http.Request) { forbidden(w) })
	if got, err := TokenLogin(context.Background(), gh2); err != nil || got != JobTokenLogin {
		t.Fatalf("job token: %q, %v", got, err)
	}
	gh3, mux3, _ := setupGitHub(t)
	mux3.HandleFunc("/user", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusTeapot) })
	if _, err := TokenLogin(context.Background(), gh3); err == nil {
		t.Fatal("418 from /user: no error")
	}
}

func TestExpiredArtifactMessages(t *testing.T) {
	t.Parallel()
	gh, mux, _ := setupGitHub(t)
	created, expires := "2026-08-01T10:00:00Z", "2026-08-08T10:00:00Z"
	mux.HandleFunc("/repos/o/r/actions/runs/7/artifacts", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{"total_count": 2, "artifacts": []any{
			map[string]any{"id": 3, "name": "prodigy-dlq-7-1", "expired": true, "created_at": created, "expires_at": expires},
			map[string]any{"id": 4, "name": "coverage"}}})
	})
	mux.HandleFunc("/repos/o/r/actions/artifacts/3/zip", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusGone)
		_, _ = io.WriteString(w, `{"message":"Artifact has expired"}`)
	})
	mux.HandleFunc("/repos/o/r/actions/artifacts/3", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{"id": 3, "name": "prodigy-dlq-7-1", "expired": true, "created_at": created, "expires_at": "2026-10-30T10:00:00Z"})
	})
	_, err := FindRunArtifact(context.Background(), gh, "o", "r", 7, "prodigy-dlq")
	if !errors.Is(err, ErrArtifactExpired) || !strings.Contains(err.Error(), "artifact prodigy-dlq-7-1 expired on 2026-08-08 (retention 7 days)") {
		t.Fatalf("expired in list: %v", err)
	}
	_, err = DownloadRunArtifact(context.Background(), gh, nil, "o", "r", 3, 0)
	if !errors.Is(err, ErrArtifactExpired) || !strings.Contains(err.Error(), "expired on 2026-10-30 (retention 90 days)") {
		t.Fatalf("410: %v", err)
	}
}

func TestBuildDLQZipKeepsModificationTimes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	items := filepath.Join(dir, "items")
	if err := os.MkdirAll(items, 0o755); err != nil {
		t.Fatal(err)
	}
	older := time.Date(2026, 3, 4, 5, 6, 8, 0, time.UTC)
	newer := time.Date(2026, 3, 5, 7, 8, 10, 0, time.UTC)
	for name, mt := range map[string]time.Time{"a.json": older, "b.json": newer} {
		p := filepath.Join(items, name)
		if err := os.WriteFile(p, []byte(`{"item_id":"`+name+`"}`), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, mt, mt); err != nil {
			t.Fatal(err)
		}
	}
	data, _, err := BuildDLQZip(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]time.Time{"items/a.json": older, "items/b.json": newer, DLQArrayFile: newer}
	for _, f := range zr.File {
		w, ok := want[f.Name]
		if !ok {
			continue
		}
		if !f.Modified.Equal(w) {
			t.Errorf("%s: modified %s, want %s", f.Name, f.Modified.UTC(), w)
		}
		delete(want, f.Name)
	}
	if len(want) != 0 {
		t.Errorf("entries missing: %v", want)
	}
}
