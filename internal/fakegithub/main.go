// Command fakegithub is a small stand-in for the GitHub REST API used by the
// end-to-end test of the container Action (.ci/action-e2e). It serves what
// the Action calls:
//
//	GET    /user                                   403, as for the job token
//	GET    /repos/{o}/{r}/issues/{n}/comments      list (paged by per_page/page)
//	POST   /repos/{o}/{r}/issues/{n}/comments      create, author github-actions[bot]
//	PATCH  /repos/{o}/{r}/issues/comments/{id}     edit
//	GET    /repos/{o}/{r}/actions/runs/{id}        the run (same repository, event pull_request)
//	GET    /repos/{o}/{r}/actions/runs/{id}/artifacts  the zips act's artifact server stored
//	GET    /repos/{o}/{r}/actions/runs/{id}/approvals  one approval of -approve ENV by e2e-reviewer
//	                                               with -approval-comment (none without -approve)
//	GET    /repos/{o}/{r}/actions/artifacts/{id}/zip   302 to /blob/{id} (no token allowed there)
//	GET    /_state                                 every comment and request, as JSON (for checks)
//
// Artifacts come from an act artifact-server directory (-artifacts DIR):
// DIR/<run>/<name>/<name>.zip, with act's id (FNV-32a of the name). Only
// requests for -repo carrying "Authorization: Bearer <-token>" are served.
// It listens on -addr and writes the bound address to -addr-file.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"hash/fnv"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

type comment struct {
	ID        int64          `json:"id"`
	Body      string         `json:"body"`
	User      map[string]any `json:"user"`
	HTMLURL   string         `json:"html_url"`
	Issue     int            `json:"issue"`
	CreatedAt time.Time      `json:"created_at"`
	UpdatedAt time.Time      `json:"updated_at"`
}

type server struct {
	repo, token, artifacts string
	approve, approval      string // environment approved in every run, its comment
	mu                     sync.Mutex
	comments               []*comment
	nextID                 int64
	requests               []string
}

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen address")
	addrFile := flag.String("addr-file", "", "write the bound host:port here")
	repo := flag.String("repo", "prodigy-action/prodigy-action", "owner/repo served")
	token := flag.String("token", "", "required bearer token")
	arts := flag.String("artifacts", "", "act artifact-server directory")
	approve := flag.String("approve", "", "environment every run's review history approves")
	approval := flag.String("approval-comment", "", "the approving reviewer's comment (\\n: a new line)")
	flag.Parse()
	s := &server{repo: *repo, token: *token, artifacts: *arts, nextID: 1000, approve: *approve,
		approval: strings.ReplaceAll(*approval, `\n`, "\n")}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	if *addrFile != "" {
		if err := os.WriteFile(*addrFile, []byte(ln.Addr().String()), 0o644); err != nil {
			log.Fatal(err)
		}
	}
	log.Printf("fakegithub serving %s on http://%s", *repo, ln.Addr())
	log.Fatal(http.Serve(ln, s))
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.requests = append(s.requests, r.Method+" "+r.URL.Path)
	s.mu.Unlock()
	log.Printf("%s %s", r.Method, r.URL.RequestURI())
	p := strings.Trim(r.URL.Path, "/")
	if p == "_state" {
		s.mu.Lock()
		defer s.mu.Unlock()
		writeJSON(w, http.StatusOK, map[string]any{"comments": s.comments, "requests": s.requests})
		return
	}
	if strings.HasPrefix(p, "blob/") {
		s.blob(w, r, strings.TrimPrefix(p, "blob/"))
		return
	}
	if r.Header.Get("Authorization") != "Bearer "+s.token {
		writeJSON(w, http.StatusUnauthorized, map[string]string{"message": "Bad credentials"})
		return
	}
	if p == "user" {
		writeJSON(w, http.StatusForbidden, map[string]string{"message": "Resource not accessible by integration"})
		return
	}
	prefix := "repos/" + s.repo + "/"
	if !strings.HasPrefix(p, prefix) {
		writeJSON(w, http.StatusNotFound, map[string]string{"message": "Not Found"})
		return
	}
	parts := strings.Split(strings.TrimPrefix(p, prefix), "/")
	switch {
	case len(parts) == 3 && parts[0] == "issues" && parts[2] == "comments":
		n, err := strconv.Atoi(parts[1])
		if err != nil {
			break
		}
		s.issueComments(w, r, n)
		return
	case len(parts) == 3 && parts[0] == "issues" && parts[1] == "comments" && r.Method == http.MethodPatch:
		id, _ := strconv.ParseInt(parts[2], 10, 64)
		s.editComment(w, r, id)
		return
	case len(parts) == 3 && parts[0] == "actions" && parts[1] == "runs":
		run, _ := strconv.ParseInt(parts[2], 10, 64)
		full := map[string]any{"full_name": s.repo}
		writeJSON(w, http.StatusOK, map[string]any{"id": run, "event": "pull_request", "path": ".github/workflows/example.yml",
			"repository": full, "head_repository": full, "status": "completed"})
		return
	case len(parts) == 4 && parts[0] == "actions" && parts[1] == "runs" && parts[3] == "approvals":
		list := []map[string]any{}
		if s.approve != "" {
			list = append(list, map[string]any{"state": "approved", "comment": s.approval,
				"environments": []map[string]any{{"name": s.approve}}, "user": map[string]any{"login": "e2e-reviewer"}})
		}
		writeJSON(w, http.StatusOK, list)
		return
	case len(parts) == 4 && parts[0] == "actions" && parts[1] == "runs" && parts[3] == "artifacts":
		s.listArtifacts(w, r, parts[2])
		return
	case len(parts) == 4 && parts[0] == "actions" && parts[1] == "artifacts" && parts[3] == "zip":
		if _, ok := s.findArtifact(parts[2]); !ok {
			writeJSON(w, http.StatusNotFound, map[string]string{"message": "Not Found"})
			return
		}
		http.Redirect(w, r, "http://"+r.Host+"/blob/"+parts[2], http.StatusFound)
		return
	}
	writeJSON(w, http.StatusNotFound, map[string]string{"message": "Not Found"})
}

func (s *server) issueComments(w http.ResponseWriter, r *http.Request, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch r.Method {
	case http.MethodGet:
		perPage, _ := strconv.Atoi(r.URL.Query().Get("per_page"))
		if perPage <= 0 {
			perPage = 30
		}
		page, _ := strconv.Atoi(r.URL.Query().Get("page"))
		page = max(page, 1)
		var mine []*comment
		for _, c := range s.comments {
			if c.Issue == n {
				mine = append(mine, c)
			}
		}
		start, end := min((page-1)*perPage, len(mine)), min(page*perPage, len(mine))
		if end < len(mine) {
			w.Header().Set("Link", fmt.Sprintf(`<http://%s%s?per_page=%d&page=%d>; rel="next"`, r.Host, r.URL.Path, perPage, page+1))
		}
		writeJSON(w, http.StatusOK, append([]*comment{}, mine[start:end]...))
	case http.MethodPost:
		var in struct{ Body string }
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.Body == "" {
			writeJSON(w, http.StatusUnprocessableEntity, map[string]string{"message": "body is missing"})
			return
		}
		s.nextID++
		now := time.Now().UTC()
		c := &comment{ID: s.nextID, Body: in.Body, User: map[string]any{"login": "github-actions[bot]", "type": "Bot"},
			HTMLURL: fmt.Sprintf("https://github.com/%s/pull/%d#issuecomment-%d", s.repo, n, s.nextID), Issue: n,
			CreatedAt: now, UpdatedAt: now}
		s.comments = append(s.comments, c)
		writeJSON(w, http.StatusCreated, c)
	default:
		writeJSON(w, http.StatusMethodNotAllowed, map[string]string{"message": "method not allowed"})
	}
}

func (s *server) editComment(w http.ResponseWriter, r *http.Request, id int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var in struct{ Body string }
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.Body == "" {
		writeJSON(w, http.StatusUnprocessableEntity, map[string]string{"message": "body is missing"})
		return
	}
	for _, c := range s.comments {
		if c.ID == id {
			c.Body, c.UpdatedAt = in.Body, time.Now().UTC()
			writeJSON(w, http.StatusOK, c)
			return
		}
	}
	writeJSON(w, http.StatusNotFound, map[string]string{"message": "Not Found"})
}

// artifactID is act's id for an artifact name.
func artifactID(name string) int64 {
	h := fnv.New32a()
	h.Write([]byte(name))
	return int64(h.Sum32())
}

func (s *server) listArtifacts(w http.ResponseWriter, r *http.Request, run string) {
	if _, err := strconv.ParseInt(run, 10, 64); err != nil {
		writeJSON(w, http.StatusNotFound, map[string]string{"message": "Not Found"})
		return
	}
	entries, err := os.ReadDir(filepath.Join(s.artifacts, run))
	if err != nil {
		writeJSON(w, http.StatusNotFound, map[string]string{"message": "Not Found"})
		return
	}
	var list []map[string]any
	for _, e := range entries {
		zipPath := filepath.Join(s.artifacts, run, e.Name(), e.Name()+".zip")
		fi, err := os.Stat(zipPath)
		if err != nil {
			continue
		}
		id := artifactID(e.Name())
		list = append(list, map[string]any{"id": id, "name": e.Name(), "size_in_bytes": fi.Size(), "expired": false,
			"created_at": fi.ModTime().UTC(), "expires_at": fi.ModTime().UTC().Add(7 * 24 * time.Hour),
			"archive_download_url": fmt.Sprintf("http://%s/repos/%s/actions/artifacts/%d/zip", r.Host, s.repo, id)})
	}
	writeJSON(w, http.StatusOK, map[string]any{"total_count": len(list), "artifacts": list})
}

// findArtifact returns the zip path of artifact id (any run).
func (s *server) findArtifact(id string) (string, bool) {
	runs, _ := os.ReadDir(s.artifacts)
	for _, run := range runs {
		names, _ := os.ReadDir(filepath.Join(s.artifacts, run.Name()))
		for _, n := range names {
			if strconv.FormatInt(artifactID(n.Name()), 10) == id {
				p := filepath.Join(s.artifacts, run.Name(), n.Name(), n.Name()+".zip")
				if _, err := os.Stat(p); err == nil {
					return p, true
				}
			}
		}
	}
	return "", false
}

// blob serves an artifact zip as the storage host does: no credentials.
func (s *server) blob(w http.ResponseWriter, r *http.Request, id string) {
	if r.Header.Get("Authorization") != "" {
		http.Error(w, "the storage URL must be fetched without the token", http.StatusBadRequest)
		return
	}
	p, ok := s.findArtifact(id)
	if !ok {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/zip")
	http.ServeFile(w, r, p)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
