package ghaction

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-github/v60/github"
)

// baseURLPath mounts the fake API under a prefix, as go-github's own tests
// do, so absolute endpoint paths would not match.
const baseURLPath = "/api-v3"

// setupGitHub returns a go-github client (with a token) talking to mux.
func setupGitHub(t *testing.T) (*github.Client, *http.ServeMux, *httptest.Server) {
	t.Helper()
	mux := http.NewServeMux()
	api := http.NewServeMux()
	api.Handle(baseURLPath+"/", http.StripPrefix(baseURLPath, mux))
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	c := github.NewClient(nil).WithAuthToken("ghs_secret_token")
	u, _ := url.Parse(srv.URL + baseURLPath + "/")
	c.BaseURL, c.UploadURL = u, u
	return c, mux, srv
}

func wantAuth(t *testing.T, r *http.Request) {
	t.Helper()
	if got := r.Header.Get("Authorization"); got != "Bearer ghs_secret_token" {
		t.Errorf("%s %s: Authorization = %q", r.Method, r.URL.Path, got)
	}
}

func forbidden(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusForbidden)
	_, _ = io.WriteString(w, `{"message":"Resource not accessible by integration","documentation_url":"https://docs.github.com/rest"}`)
}

// fakeComments models the issue-comment endpoints of one PR.
type fakeComments struct {
	mu       sync.Mutex
	comments []map[string]any
	nextID   int64
	posts    int
	patches  int
	readOnly bool
	poster   map[string]any // the author of created comments; nil: github-actions[bot]
	noEdit   map[int64]bool // comments the token may not edit (403)
}

func (f *fakeComments) register(t *testing.T, mux *http.ServeMux, pr int) {
	mux.HandleFunc(fmt.Sprintf("/repos/o/r/issues/%d/comments", pr), func(w http.ResponseWriter, r *http.Request) {
		wantAuth(t, r)
		f.mu.Lock()
		defer f.mu.Unlock()
		switch r.Method {
		case http.MethodGet:
			if r.URL.Query().Get("per_page") != "100" {
				t.Errorf("list without per_page=100: %s", r.URL.RawQuery)
			}
			page := 1
			fmt.Sscan(r.URL.Query().Get("page"), &page)
			start, end := (page-1)*2, min(page*2, len(f.comments)) // two per page to exercise paging
			if page*2 < len(f.comments) {
				w.Header().Set("Link", fmt.Sprintf(`<%s?page=%d&per_page=100>; rel="next"`, r.URL.Path, page+1))
			}
			var out []map[string]any
			if start < end {
				out = f.comments[start:end]
			}
			_ = json.NewEncoder(w).Encode(out)
		case http.MethodPost:
			if f.readOnly {
				forbidden(w)
				return
			}
			var in struct{ Body string }
			_ = json.NewDecoder(r.Body).Decode(&in)
			f.posts++
			f.nextID++
			poster := f.poster
			if poster == nil {
				poster = map[string]any{"login": "github-actions[bot]"}
			}
			c := map[string]any{"id": f.nextID, "body": in.Body, "user": poster,
				"html_url": fmt.Sprintf("https://github.com/o/r/pull/%d#issuecomment-%d", pr, f.nextID)}
			f.comments = append(f.comments, c)
			w.WriteHeader(http.StatusCreated)
			_ = json.NewEncoder(w).Encode(c)
		default:
			t.Errorf("unexpected %s", r.Method)
		}
	})
	mux.HandleFunc("/repos/o/r/issues/comments/", func(w http.ResponseWriter, r *http.Request) {
		wantAuth(t, r)
		f.mu.Lock()
		defer f.mu.Unlock()
		if r.Method != http.MethodPatch {
			t.Errorf("unexpected %s", r.Method)
		}
		var id int64
		fmt.Sscan(strings.TrimPrefix(r.URL.Path, "/repos/o/r/issues/comments/"), &id)
		if f.noEdit[id] {
			forbidden(w)
			return
		}
		var in struct{ Body string }
		_ = json.NewDecoder(r.Body).Decode(&in)
		for _, c := range f.comments {
			if c["id"] == id {
				f.patches++
				c["body"] = in.Body
				_ = json.NewEncoder(w).Encode(c)
				return
			}
		}
		w.WriteHeader(http.StatusNotFound)
	})
}

func TestStickyCommentCreateThenEdit(t *testing.T) {
	t.Parallel()
	gh, mux, _ := setupGitHub(t)
	f := &fakeComments{nextID: 100}
	// Other people's comments, one of them quoting a different key's marker.
	for i, body := range []string{"LGTM", "nit", CommentMarker("other-workflow"), "ok"} {
		f.comments = append(f.comments, map[string]any{"id": int64(i + 1), "body": body, "user": map[string]any{"login": "alice"}})
	}
	f.register(t, mux, 12)
	ctx := context.Background()

	res, err := UpsertStickyComment(ctx, gh, "o", "r", 12, "ci / fanout", "github-actions[bot]", "first body")
	if err != nil {
		t.Fatal(err)
	}
	if !res.Created || res.CommentID != 101 || f.posts != 1 || f.patches != 0 {
		t.Fatalf("first upsert = %+v (posts %d, patches %d), want a created comment", res, f.posts, f.patches)
	}
	res, err = UpsertStickyComment(ctx, gh, "o", "r", 12, "ci / fanout", "github-actions[bot]", "second body")
	if err != nil {
		t.Fatal(err)
	}
	if res.Created || res.CommentID != 101 || f.posts != 1 || f.patches != 1 {
		t.Fatalf("second upsert = %+v (posts %d, patches %d), want an edit of 101", res, f.posts, f.patches)
	}
	body := f.comments[4]["body"].(string)
	if !strings.HasPrefix(body, "second body") || !strings.Contains(body, CommentMarker("ci / fanout")) {
		t.Errorf("edited body = %q", body)
	}
	// A different key makes its own comment.
	if res, err := UpsertStickyComment(ctx, gh, "o", "r", 12, "nightly", "github-actions[bot]", "x"); err != nil || !res.Created {
		t.Errorf("other key: %+v, %v; want a new comment", res, err)
	}
}

func TestStickyCommentErrors(t *testing.T) {
	t.Parallel()
	gh, mux, _ := setupGitHub(t)
	f := &fakeComments{readOnly: true}
	f.register(t, mux, 5)
	ctx := context.Background()

	_, err := UpsertStickyComment(ctx, gh, "o", "r", 5, "k", "", "body")
	var pe *PermissionError
	if !errors.Is(err, ErrForbidden) || !errors.As(err, &pe) || pe.Permission != "pull-requests: write" {
		t.Fatalf("fork PR: err = %v, want a 403 PermissionError", err)
	}
	if !strings.Contains(err.Error(), "Resource not accessible by integration") {
		t.Errorf("error lacks GitHub's message: %v", err)
	}
	if _, err := UpsertStickyComment(ctx, gh, "o", "r", 0, "k", "", "body"); !errors.Is(err, ErrNoPullRequest) {
		t.Errorf("pr 0: err = %v, want ErrNoPullRequest (and no request)", err)
	}
	if _, err := UpsertStickyComment(ctx, gh, "o", "r", 5, "k", "", strings.Repeat("x", MaxCommentChars)); err == nil {
		t.Error("oversized body accepted")
	}
	// 404: unknown PR or no access.
	if _, err := UpsertStickyComment(ctx, gh, "o", "r", 6, "k", "", "b"); !errors.Is(err, ErrNotFound) {
		t.Errorf("pr 6: err = %v, want ErrNotFound", err)
	}
}

func TestCommentMarkerCannotCloseComment(t *testing.T) {
	t.Parallel()
	m := CommentMarker("a ---> <b>\n--")
	if strings.Count(m, "-->") != 1 || !strings.HasSuffix(m, " -->") || strings.Contains(m[4:len(m)-3], "--") {
		t.Errorf("marker %q can be broken out of", m)
	}
}

func TestFindAndDownloadRunArtifact(t *testing.T) {
	t.Parallel()
	gh, mux, _ := setupGitHub(t)
	blobHits := 0
	blob := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		blobHits++
		if r.Header.Get("Authorization") != "" {
			t.Errorf("token sent to the blob host: %q", r.Header.Get("Authorization"))
		}
		_, _ = io.WriteString(w, "zip-bytes-"+r.URL.Query().Get("id"))
	}))
	t.Cleanup(blob.Close)

	mux.HandleFunc("/repos/o/r/actions/runs/42/artifacts", func(w http.ResponseWriter, r *http.Request) {
		wantAuth(t, r)
		page := r.URL.Query().Get("page")
		type art = map[string]any
		var list []art
		switch page {
		case "", "1":
			w.Header().Set("Link", `<`+r.URL.Path+`?page=2>; rel="next"`)
			list = []art{{"id": 10, "name": "prodigy-dlq-42-1"}, {"id": 11, "name": "coverage"}}
		case "2":
			list = []art{{"id": 30, "name": "prodigy-dlq-42-3", "expired": true}, {"id": 20, "name": "prodigy-dlq-42-2"}}
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"total_count": 4, "artifacts": list})
	})
	mux.HandleFunc("/repos/o/r/actions/artifacts/20/zip", func(w http.ResponseWriter, r *http.Request) {
		wantAuth(t, r)
		http.Redirect(w, r, blob.URL+"/blob?id=20&sig=abc", http.StatusFound)
	})
	mux.HandleFunc("/repos/o/r/actions/artifacts/21/zip", func(w http.ResponseWriter, r *http.Request) {
		forbidden(w)
	})
	mux.HandleFunc("/repos/o/r/actions/artifacts/22/zip", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusGone)
	})
	ctx := context.Background()

	a, err := FindRunArtifact(ctx, gh, "o", "r", 42, "prodigy-dlq")
	if err != nil {
		t.Fatal(err)
	}
	if a.GetID() != 20 {
		t.Fatalf("picked artifact %d, want 20 (newest unexpired)", a.GetID())
	}
	if _, err := FindRunArtifact(ctx, gh, "o", "r", 42, "nothing"); !errors.Is(err, ErrNoArtifact) {
		t.Errorf("no match: err = %v", err)
	}
	data, err := DownloadRunArtifact(ctx, gh, blob.Client(), "o", "r", 20, 0)
	if err != nil {
		t.Fatal(err)
	}
	if string(data) != "zip-bytes-20" || blobHits != 1 {
		t.Errorf("data = %q, blob hits %d", data, blobHits)
	}
	if _, err := DownloadRunArtifact(ctx, gh, blob.Client(), "o", "r", 20, 4); err == nil {
		t.Error("body over maxBytes accepted")
	}
	if _, err := DownloadRunArtifact(ctx, gh, blob.Client(), "o", "r", 21, 0); !errors.Is(err, ErrForbidden) {
		t.Errorf("403: err = %v", err)
	}
	if _, err := DownloadRunArtifact(ctx, gh, blob.Client(), "o", "r", 22, 0); err == nil || !strings.Contains(err.Error(), "expired") {
		t.Errorf("410: err = %v", err)
	}
}

func TestFindRunArtifactPermissionErrors(t *testing.T) {
	t.Parallel()
	gh, mux, _ := setupGitHub(t)
	mux.HandleFunc("/repos/o/r/actions/runs/1/artifacts", func(w http.ResponseWriter, r *http.Request) { forbidden(w) })
	mux.HandleFunc("/repos/o/r/actions/runs/2/artifacts", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, `{"message":"Not Found"}`)
	})
	_, err := FindRunArtifact(context.Background(), gh, "o", "r", 1, "dlq")
	var pe *PermissionError
	if !errors.Is(err, ErrForbidden) || !errors.As(err, &pe) || pe.Permission != "actions: read" {
		t.Fatalf("403: err = %v, want a PermissionError", err)
	}
	if !strings.Contains(err.Error(), "actions: read") {
		t.Errorf("error lacks the permission hint: %v", err)
	}
	// 404: GitHub cannot tell "no such run" from "may not see it".
	_, err = FindRunArtifact(context.Background(), gh, "o", "r", 2, "dlq")
	if !errors.Is(err, ErrRunNotFound) || !errors.Is(err, ErrNotFound) {
		t.Fatalf("404: err = %v, want ErrRunNotFound", err)
	}
	if want := "run 2 not found in o/r (or the token lacks `actions: read`)"; err.Error() != want {
		t.Errorf("404: message %q, want %q", err.Error(), want)
	}
}
