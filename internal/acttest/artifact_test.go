package acttest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/julienschmidt/httprouter"
	"github.com/nektos/act/pkg/artifacts"
	"github.com/nektos/act/pkg/common"

	"github.com/prodigy-action/prodigy-action/ghaction"
)

// osFS is the os-backed WriteFS + fs.FS act's server needs (its own is
// unexported); act passes absolute paths under the base dir.
type osFS struct{}

func (osFS) Open(name string) (fs.File, error) { return os.Open(name) }

func (osFS) OpenWritable(name string) (artifacts.WritableFile, error) {
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		return nil, err
	}
	return os.OpenFile(name, os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0o644)
}

func (osFS) OpenAppendable(name string) (artifacts.WritableFile, error) {
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		return nil, err
	}
	return os.OpenFile(name, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
}

// conflictOnDuplicate models the real results service's 409 for a second
// CreateArtifact of a finalized name on the same run; act's server instead
// truncates the existing artifact.
type conflictOnDuplicate struct {
	next      http.Handler
	mu        sync.Mutex
	finalized map[string]bool // "<run>/<name>"
}

func (c *conflictOnDuplicate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	method := strings.TrimPrefix(r.URL.Path, artifacts.ArtifactV4RouteBase+"/")
	if method != "CreateArtifact" && method != "FinalizeArtifact" {
		c.next.ServeHTTP(w, r)
		return
	}
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	var req struct {
		Run  string `json:"workflow_run_backend_id"`
		Name string `json:"name"`
	}
	_ = json.Unmarshal(body, &req)
	key := req.Run + "/" + req.Name
	c.mu.Lock()
	defer c.mu.Unlock()
	if method == "CreateArtifact" && c.finalized[key] {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusConflict)
		_, _ = io.WriteString(w, `{"code":"already_exists","msg":"Conflict: an artifact with this name already exists on the workflow run"}`)
		return
	}
	rec := httptest.NewRecorder()
	c.next.ServeHTTP(rec, r)
	if method == "FinalizeArtifact" && rec.Code == http.StatusOK {
		c.finalized[key] = true
	}
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	_, _ = w.Write(rec.Body.Bytes())
}

type server struct {
	baseDir string
	url     string
	token   string
}

// startAct serves act's v4 artifact routes from a temp dir for run 42, job 7.
func startAct(t *testing.T, conflicts bool) server {
	t.Helper()
	dir := t.TempDir()
	router := httprouter.New()
	artifacts.RoutesV4(router, dir, osFS{}, osFS{})
	var h http.Handler = router
	if conflicts {
		h = &conflictOnDuplicate{next: router, finalized: map[string]bool{}}
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	tok, err := common.CreateAuthorizationToken(1, 42, 7)
	if err != nil {
		t.Fatal(err)
	}
	return server{baseDir: dir, url: srv.URL, token: tok}
}

func newClient(t *testing.T, s server) *ghaction.ArtifactClient {
	t.Helper()
	c, err := ghaction.NewArtifactClient(ghaction.ArtifactClientOptions{
		ResultsURL:   s.url + "/",
		RuntimeToken: s.token,
		Retry:        ghaction.RetryPolicy{Sleep: func(context.Context, time.Duration) error { return nil }},
		Now:          func() time.Time { return time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC) },
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// dlqZip builds a DLQ zip from a small job DLQ folder.
func dlqZip(t *testing.T) []byte {
	t.Helper()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "items"), 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		rec := fmt.Sprintf(`{"item_id":"item-%d","item_data":{"n":%d},"failure_count":%d,"failure_history":[],"error_signature":"Timeout::x","reprocess_eligible":true,"manual_review_required":false}`, i, i, i+1)
		if err := os.WriteFile(filepath.Join(dir, "items", fmt.Sprintf("item-%d.json", i)), []byte(rec), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "index.json"), []byte(`{"job_id":"j","item_count":3,"item_ids":["item-0","item-1","item-2"]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	data, n, err := ghaction.BuildDLQZip(dir, nil)
	if err != nil || n != 3 {
		t.Fatalf("BuildDLQZip: n=%d err=%v", n, err)
	}
	return data
}

func TestUploadListDownloadAgainstAct(t *testing.T) {
	t.Parallel()
	s := startAct(t, false)
	c := newClient(t, s)
	ctx := context.Background()
	data := dlqZip(t)

	up, err := c.Upload(ctx, "prodigy-dlq-42-1", data, 5)
	if err != nil {
		t.Fatal(err)
	}
	if up.ID == 0 || up.Size != int64(len(data)) || !strings.HasPrefix(up.Digest, "sha256:") {
		t.Errorf("upload = %+v", up)
	}
	onDisk, err := os.ReadFile(filepath.Join(s.baseDir, "42", "prodigy-dlq-42-1", "prodigy-dlq-42-1.zip"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(onDisk, data) {
		t.Fatalf("stored zip differs: %d bytes stored, %d sent", len(onDisk), len(data))
	}

	list, err := c.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].Name != "prodigy-dlq-42-1" || list[0].ID != up.ID {
		t.Errorf("list = %+v, want the uploaded artifact with id %d", list, up.ID)
	}
	if l, err := c.List(ctx, "other"); err != nil || len(l) != 0 {
		t.Errorf("filtered list = %+v, %v", l, err)
	}

	got, err := c.Download(ctx, "prodigy-dlq-42-1")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		t.Fatal("downloaded zip is not byte-identical")
	}
	out := t.TempDir()
	if err := ghaction.ExtractZip(got, out, ghaction.ExtractLimits{}); err != nil {
		t.Fatal(err)
	}
	var arr []map[string]any
	raw, _ := os.ReadFile(filepath.Join(out, ghaction.DLQArrayFile))
	if err := json.Unmarshal(raw, &arr); err != nil || len(arr) != 3 {
		t.Fatalf("dlq.json = %s (%v)", raw, err)
	}
}

func TestMultiBlockUploadAgainstAct(t *testing.T) {
	t.Parallel()
	s := startAct(t, false)
	c := newClient(t, s)
	data := make([]byte, 9<<20+123) // two Put Blocks of 8 MiB + rest
	if _, err := rand.Read(data); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Upload(context.Background(), "big", data, 0); err != nil {
		t.Fatal(err)
	}
	got, err := c.Download(context.Background(), "big")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		t.Fatal("multi-block artifact is not byte-identical")
	}
}

func TestDuplicateNameAgainstAct(t *testing.T) {
	t.Parallel()
	s := startAct(t, true)
	c := newClient(t, s)
	ctx := context.Background()
	first, second := dlqZip(t), []byte("PK second attempt")

	if _, err := c.Upload(ctx, "prodigy-dlq-42-1", first, 0); err != nil {
		t.Fatal(err)
	}
	_, err := c.Upload(ctx, "prodigy-dlq-42-1", second, 0)
	if !errors.Is(err, ghaction.ErrArtifactExists) {
		t.Fatalf("duplicate upload: err = %v, want ErrArtifactExists", err)
	}
	up, err := c.UploadUnique(ctx, "prodigy-dlq-42-1", second, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if up.Name != "prodigy-dlq-42-1-2" {
		t.Errorf("unique name = %q, want prodigy-dlq-42-1-2", up.Name)
	}
	// The first artifact is untouched and the second is stored separately.
	for name, want := range map[string][]byte{"prodigy-dlq-42-1": first, "prodigy-dlq-42-1-2": second} {
		got, err := c.Download(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: downloaded bytes differ", name)
		}
	}
	list, err := c.List(ctx, "")
	if err != nil || len(list) != 2 {
		t.Errorf("list = %+v, %v; want 2 artifacts", list, err)
	}
}
