package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"

	"github.com/prodigy-action/prodigy-action/dlq"
	"github.com/prodigy-action/prodigy-action/ghaction"
	"github.com/prodigy-action/prodigy-action/redact"
)

// artifactEnv makes this binary build and upload the DLQ artifact of the
// directory it names (the Action's code path: ghaction.WriteDLQZip to a
// temporary file, then ArtifactClient.UploadUniqueFrom) to an in-process
// artifact service that counts and discards what it receives, and print
// what it sent. Run through the launcher, its peak RSS is the build's and
// upload's own (issue 26: memory independent of the record count).
const artifactEnv = "DLQ_BENCH_ARTIFACT_DIR"

type artifactResult struct {
	Records  int   `json:"records"`
	ZipBytes int64 `json:"zip_bytes"`
	Received int64 `json:"received_bytes"`
}

// artifactChild is main for artifactEnv.
func artifactChild(dir string) int {
	var received atomic.Int64
	mux := http.NewServeMux()
	var srvURL string
	mux.HandleFunc("/twirp/github.actions.results.api.v1.ArtifactService/", func(w http.ResponseWriter, r *http.Request) {
		method := r.URL.Path[strings.LastIndexByte(r.URL.Path, '/')+1:]
		_, _ = io.Copy(io.Discard, r.Body)
		switch method {
		case "CreateArtifact":
			fmt.Fprintf(w, `{"ok":true,"signed_upload_url":%q}`, srvURL+"/blob/dlq?sig=x")
		case "FinalizeArtifact":
			fmt.Fprint(w, `{"ok":true,"artifact_id":"1"}`)
		default:
			http.NotFound(w, r)
		}
	})
	mux.HandleFunc("/blob/", func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		if r.URL.Query().Get("comp") == "block" {
			received.Add(n)
		}
		w.WriteHeader(http.StatusCreated)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	srvURL = srv.URL
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "artifact:", err)
		return 1
	}
	client, err := ghaction.NewArtifactClient(ghaction.ArtifactClientOptions{
		ResultsURL: srv.URL + "/",
		// {"scp":"Actions.Results:run-b:job-b"}: the backend ids the client sends.
		RuntimeToken: "eyJhbGciOiJub25lIn0.eyJzY3AiOiJBY3Rpb25zLlJlc3VsdHM6cnVuLWI6am9iLWIifQ.sig",
	})
	if err != nil {
		return fail(err)
	}
	f, err := os.CreateTemp("", "dlq-bench-*.zip")
	if err != nil {
		return fail(err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	// Redacted as the Action redacts it: its token shapes plus the
	// workflow's secret values (here one, which no record holds).
	red := redact.New(redact.Config{Values: []string{"bench-secret-value-0123456789"}})
	blob, n, err := ghaction.WriteDLQZipFile(f, dir, red.JSON)
	if err != nil {
		return fail(err)
	}
	if _, err := client.UploadUniqueFrom(context.Background(), "prodigy-dlq-1-1", blob, 0, 1); err != nil {
		return fail(err)
	}
	_ = json.NewEncoder(os.Stdout).Encode(artifactResult{Records: n, ZipBytes: blob.Size, Received: received.Load()})
	return 0
}

// timeArtifact measures the artifact's build and upload against a `cat`
// of every record (find | xargs cat, the floor of reading them), each in
// its own process through the launcher, both after one untimed read that
// puts the records in the page cache.
func timeArtifact(home string) (art, cat Result, err error) {
	dir := dlq.Dir(filepath.Join(home, "dlq", repo, jobID), jobID)
	catArgs := []string{"/bin/sh", "-c", `find "$1" -name '*.json' -print0 | xargs -0 cat > /dev/null`, "sh", filepath.Join(dir, "items")}
	if _, err := launchTimed(catArgs, nil); err != nil { // warm the page cache
		return art, cat, err
	}
	if cat, err = launchTimed(catArgs, nil); err != nil {
		return art, cat, err
	}
	self, err := os.Executable()
	if err != nil {
		return art, cat, err
	}
	art, err = launchTimed([]string{self}, []string{artifactEnv + "=" + dir})
	return art, cat, err
}
