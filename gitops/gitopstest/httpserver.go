package gitopstest

import (
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// HTTPServer serves the bare repositories under root over git's smart HTTP
// protocol — the real `git http-backend` behind an httptest server, pushes
// allowed — and records every request's method, path and Authorization
// header. Repositories are at URL()+"/<name>.git".
type HTTPServer struct {
	*httptest.Server
	mu       sync.Mutex
	requests []Request
}

// Request is one request an [HTTPServer] received.
type Request struct {
	Method, Path, Authorization string
}

// NewHTTPServer starts a server for the bare repositories under root; it
// is closed when t ends.
func NewHTTPServer(t testing.TB, root string) *HTTPServer {
	t.Helper()
	execPath, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		t.Fatalf("git --exec-path: %v", err)
	}
	backend := &cgi.Handler{
		Path: filepath.Join(strings.TrimSpace(string(execPath)), "git-http-backend"),
		Env: []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1",
			"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
			// http-backend enables receive-pack only for authenticated
			// users: REMOTE_USER stands in for the server's auth.
			"REMOTE_USER=pusher"},
	}
	s := &HTTPServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.requests = append(s.requests, Request{Method: r.Method, Path: r.URL.Path, Authorization: r.Header.Get("Authorization")})
		s.mu.Unlock()
		backend.ServeHTTP(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

// Requests returns the requests received so far.
func (s *HTTPServer) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}
