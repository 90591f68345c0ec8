package ghaction

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeResults is a hand-written results service covering what act's server
// does not model: Twirp error bodies, 409 on duplicate names, snake_case
// responses, transient 5xx, and strict request checks.
type fakeResults struct {
	t         *testing.T
	mu        sync.Mutex
	camel     bool              // answer in lowerCamelCase like act
	fail503   map[string]int    // method → number of 503s before success
	blobs     map[string][]byte // name → committed bytes
	pending   map[string][]byte // name → uploaded blocks not yet committed
	finalized map[string]map[string]any
	requests  []string
	srv       *httptest.Server
}

func newFakeResults(t *testing.T) *fakeResults {
	f := &fakeResults{t: t, fail503: map[string]int{}, blobs: map[string][]byte{}, pending: map[string][]byte{}, finalized: map[string]map[string]any{}}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeResults) key(snake string) string {
	if f.camel {
		return lowerCamel(snake)
	}
	return snake
}

func (f *fakeResults) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests = append(f.requests, r.Method+" "+r.URL.Path+"?"+r.URL.Query().Get("comp"))
	if strings.HasPrefix(r.URL.Path, "/blob/") {
		f.serveBlob(w, r)
		return
	}
	method := strings.TrimPrefix(r.URL.Path, twirpService)
	if r.Header.Get("Authorization") != "Bearer "+tokenFor(f.t) {
		http.Error(w, `{"code":"unauthenticated","msg":"bad token"}`, http.StatusUnauthorized)
		return
	}
	if f.fail503[method] > 0 {
		f.fail503[method]--
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	var req map[string]any
	dec := json.NewDecoder(r.Body)
	dec.UseNumber()
	if err := dec.Decode(&req); err != nil {
		http.Error(w, `{"code":"malformed","msg":"bad json"}`, http.StatusBadRequest)
		return
	}
	if req["workflow_run_backend_id"] != "run-uuid" || req["workflow_job_run_backend_id"] != "job-uuid" {
		http.Error(w, `{"code":"invalid_argument","msg":"backend ids"}`, http.StatusBadRequest)
		return
	}
	name, _ := req["name"].(string)
	out := map[string]any{}
	switch method {
	case "CreateArtifact":
		if _, ok := req["mime_type"]; ok || fmt.Sprint(req["version"]) != "4" {
			http.Error(w, `{"code":"invalid_argument","msg":"want version 4 and no mime_type"}`, http.StatusBadRequest)
			return
		}
		if _, dup := f.finalized[name]; dup {
			w.WriteHeader(http.StatusConflict)
			_, _ = io.WriteString(w, `{"code":"already_exists","msg":"Conflict: an artifact with this name already exists on the workflow run"}`)
			return
		}
		out[f.key("ok")] = true
		out[f.key("signed_upload_url")] = f.srv.URL + "/blob/" + name + "?sv=2021&sig=c2VjcmV0c2ln%3D%3D&se=x"
	case "FinalizeArtifact":
		f.finalized[name] = req
		f.blobs[name] = f.pending[name]
		out[f.key("ok")] = true
		out[f.key("artifact_id")] = fmt.Sprint(1000 + len(f.finalized)) // int64 as a string
	case "ListArtifacts":
		var list []map[string]any
		for n, b := range f.blobs {
			if nf, ok := req["name_filter"]; ok && nf != n {
				continue
			}
			list = append(list, map[string]any{f.key("name"): n, f.key("size"): fmt.Sprint(len(b)), f.key("database_id"): 7, f.key("created_at"): "2026-01-02T03:04:05Z"})
		}
		out[f.key("artifacts")] = list
	case "DeleteArtifact":
		if _, ok := f.finalized[name]; !ok {
			http.Error(w, `{"code":"not_found","msg":"artifact not found"}`, http.StatusNotFound)
			return
		}
		delete(f.finalized, name)
		delete(f.blobs, name)
		out[f.key("ok")] = true
		out[f.key("artifact_id")] = "1001"
	case "GetSignedArtifactURL":
		out[f.key("signed_url")] = f.srv.URL + "/blob/" + name + "?sig=ZG93bg%3D%3D&op=get"
	default:
		http.Error(w, `{"code":"bad_route"}`, http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

func (f *fakeResults) serveBlob(w http.ResponseWriter, r *http.Request) {
	name := strings.TrimPrefix(r.URL.Path, "/blob/")
	if r.Header.Get("Authorization") != "" {
		f.t.Errorf("blob request carried an Authorization header")
	}
	if r.URL.Query().Get("sig") == "" {
		f.t.Errorf("blob request lost the SAS signature: %s", r.URL.RawQuery)
	}
	body, _ := io.ReadAll(r.Body)
	switch {
	case r.Method == http.MethodGet:
		_, _ = w.Write(f.blobs[name])
	case r.URL.Query().Get("comp") == "block":
		if r.URL.Query().Get("blockid") == "" {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		f.pending[name] = append(f.pending[name], body...)
		w.WriteHeader(http.StatusCreated)
	case r.URL.Query().Get("comp") == "blocklist":
		if !bytes.Contains(body, []byte("<BlockList><Latest>")) {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusCreated)
	default:
		w.WriteHeader(http.StatusBadRequest)
	}
}

func tokenFor(t *testing.T) string {
	return fakeJWT(t, "Actions.Results:run-uuid:job-uuid")
}

func newTestClient(t *testing.T, f *fakeResults, sleeps *sleepRecorder, masked *[]string) *ArtifactClient {
	t.Helper()
	c, err := NewArtifactClient(ArtifactClientOptions{
		ResultsURL:   f.srv.URL + "/some/path/ignored",
		RuntimeToken: tokenFor(t),
		HTTPClient:   f.srv.Client(),
		Retry:        RetryPolicy{Sleep: sleeps.sleep},
		Now:          func() time.Time { return time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC) },
		Mask: func(s string) {
			if masked != nil {
				*masked = append(*masked, s)
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestArtifactUploadDownload(t *testing.T) {
	t.Parallel()
	for _, camel := range []bool{false, true} {
		t.Run(fmt.Sprintf("camel=%v", camel), func(t *testing.T) {
			t.Parallel()
			f := newFakeResults(t)
			f.camel = camel
			var masked []string
			c := newTestClient(t, f, &sleepRecorder{}, &masked)
			data := []byte("PK\x03\x04 fake zip bytes")
			up, err := c.Upload(context.Background(), "dlq-1-1", data, 7)
			if err != nil {
				t.Fatal(err)
			}
			sum := sha256.Sum256(data)
			if got, want := up.Digest, "sha256:"+hex.EncodeToString(sum[:]); got != want {
				t.Errorf("digest = %s, want %s", got, want)
			}
			if up.ID != 1001 || up.Size != int64(len(data)) {
				t.Errorf("upload = %+v", up)
			}
			if want := time.Date(2026, 3, 8, 0, 0, 0, 0, time.UTC); !up.ExpiresAt.Equal(want) {
				t.Errorf("expires = %v, want %v", up.ExpiresAt, want)
			}
			fin := f.finalized["dlq-1-1"]
			if fin["hash"] != up.Digest || fmt.Sprint(fin["size"]) != fmt.Sprint(len(data)) {
				t.Errorf("finalize request = %v", fin)
			}
			if fmt.Sprint(masked) != "[c2VjcmV0c2ln== c2VjcmV0c2ln%3D%3D]" {
				t.Errorf("masked = %q, want the SAS sig", masked)
			}
			list, err := c.List(context.Background(), "dlq-1-1")
			if err != nil {
				t.Fatal(err)
			}
			if len(list) != 1 || list[0].Name != "dlq-1-1" || list[0].Size != int64(len(data)) || list[0].ID != 7 {
				t.Errorf("list = %+v", list)
			}
			got, err := c.Download(context.Background(), "dlq-1-1")
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, data) {
				t.Errorf("download = %q, want %q", got, data)
			}
		})
	}
}

func TestArtifactRetriesTransientErrors(t *testing.T) {
	t.Parallel()
	f := newFakeResults(t)
	f.fail503["CreateArtifact"] = 2
	sleeps := &sleepRecorder{}
	c := newTestClient(t, f, sleeps, nil)
	if _, err := c.Upload(context.Background(), "x", []byte("z"), 0); err != nil {
		t.Fatal(err)
	}
	want := []time.Duration{3 * time.Second, 4500 * time.Millisecond}
	if fmt.Sprint(sleeps.waits) != fmt.Sprint(want) {
		t.Errorf("waits = %v, want %v", sleeps.waits, want)
	}

	f.fail503["FinalizeArtifact"] = 10
	_, err := c.Upload(context.Background(), "y", []byte("z"), 0)
	var te *TwirpError
	if !errors.As(err, &te) || te.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("err = %v, want a 503 TwirpError after 5 attempts", err)
	}
	if got := f.fail503["FinalizeArtifact"]; got != 5 {
		t.Errorf("finalize attempts = %d, want 5", 10-got)
	}
}

func TestArtifactConflict(t *testing.T) {
	t.Parallel()
	f := newFakeResults(t)
	c := newTestClient(t, f, &sleepRecorder{}, nil)
	ctx := context.Background()
	if _, err := c.Upload(ctx, "dlq", []byte("a"), 0); err != nil {
		t.Fatal(err)
	}
	_, err := c.Upload(ctx, "dlq", []byte("b"), 0)
	if !errors.Is(err, ErrArtifactExists) {
		t.Fatalf("err = %v, want ErrArtifactExists", err)
	}
	up, err := c.UploadUnique(ctx, "dlq", []byte("b"), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if up.Name != "dlq-2" {
		t.Errorf("name = %q, want dlq-2", up.Name)
	}
	up, err = c.UploadUnique(ctx, "dlq", []byte("c"), 0, 0)
	if err != nil || up.Name != "dlq-3" {
		t.Errorf("third upload = %+v, %v; want dlq-3", up, err)
	}
	if _, err := c.UploadUnique(ctx, "dlq", []byte("d"), 0, 2); !errors.Is(err, ErrArtifactExists) {
		t.Errorf("with maxTries 2: err = %v, want ErrArtifactExists", err)
	}
}

func TestArtifactClientErrors(t *testing.T) {
	t.Parallel()
	if _, err := NewArtifactClient(ArtifactClientOptions{}); !errors.Is(err, ErrArtifactsUnavailable) {
		t.Errorf("empty env: err = %v", err)
	}
	f := newFakeResults(t)
	c := newTestClient(t, f, &sleepRecorder{}, nil)
	for _, name := range []string{"", "a/b", "a:b", "x\ny"} {
		if _, err := c.Upload(context.Background(), name, nil, 0); err == nil {
			t.Errorf("name %q accepted", name)
		}
	}
	bad, err := NewArtifactClient(ArtifactClientOptions{ResultsURL: f.srv.URL, RuntimeToken: fakeJWT(t, "Actions.Results:other:job"), HTTPClient: f.srv.Client(), Retry: RetryPolicy{Sleep: (&sleepRecorder{}).sleep}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = bad.Upload(context.Background(), "n", []byte("x"), 0)
	var te *TwirpError
	if !errors.As(err, &te) || te.StatusCode != http.StatusUnauthorized || te.Code != "unauthenticated" {
		t.Errorf("err = %v, want a decoded 401 Twirp error", err)
	}
}

// TestArtifactDelete: a deleted name can be uploaded again (what a shard's
// live uploads rely on to keep one snapshot); deleting a missing name is an
// error, not a retry loop.
func TestArtifactDelete(t *testing.T) {
	f := newFakeResults(t)
	c := newTestClient(t, f, &sleepRecorder{}, nil)
	ctx := context.Background()
	if _, err := c.Upload(ctx, "live-1", []byte("one"), 0); err != nil {
		t.Fatal(err)
	}
	id, err := c.Delete(ctx, "live-1")
	if err != nil || id != 1001 {
		t.Fatalf("Delete = %d, %v", id, err)
	}
	if list, err := c.List(ctx, ""); err != nil || len(list) != 0 {
		t.Fatalf("after Delete: %+v, %v", list, err)
	}
	if _, err := c.Upload(ctx, "live-1", []byte("two"), 0); err != nil {
		t.Fatalf("upload after delete: %v", err)
	}
	var te *TwirpError
	if _, err := c.Delete(ctx, "nothing"); !errors.As(err, &te) || te.StatusCode != http.StatusNotFound {
		t.Errorf("Delete of a missing name = %v, want a 404 TwirpError", err)
	}
}
