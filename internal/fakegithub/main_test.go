package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-github/v60/github"
)

// TestFakeThroughGoGitHub drives the fake with the client the Action uses,
// so the e2e test's checks rest on endpoints that behave like GitHub's.
func TestFakeThroughGoGitHub(t *testing.T) {
	arts := t.TempDir()
	zipPath := filepath.Join(arts, "1", "prodigy-dlq-1-1", "prodigy-dlq-1-1.zip")
	if err := os.MkdirAll(filepath.Dir(zipPath), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(zipPath, []byte("PK-zip"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := &server{repo: "o/r", token: "tok", artifacts: arts, nextID: 1000}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	gh := github.NewClient(nil).WithAuthToken("tok")
	gh.BaseURL, _ = url.Parse(srv.URL + "/")
	ctx := context.Background()

	if _, resp, err := gh.Users.Get(ctx, ""); err == nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("GET /user: %v, want 403 as for the job token", err)
	}
	c, _, err := gh.Issues.CreateComment(ctx, "o", "r", 7, &github.IssueComment{Body: github.String("one")})
	if err != nil || c.GetUser().GetLogin() != "github-actions[bot]" {
		t.Fatalf("create: %+v, %v", c, err)
	}
	if _, _, err := gh.Issues.EditComment(ctx, "o", "r", c.GetID(), &github.IssueComment{Body: github.String("two")}); err != nil {
		t.Fatal(err)
	}
	list, _, err := gh.Issues.ListComments(ctx, "o", "r", 7, &github.IssueListCommentsOptions{ListOptions: github.ListOptions{PerPage: 100}})
	if err != nil || len(list) != 1 || list[0].GetBody() != "two" {
		t.Fatalf("list: %v, %v", list, err)
	}
	al, _, err := gh.Actions.ListWorkflowRunArtifacts(ctx, "o", "r", 1, nil)
	if err != nil || len(al.Artifacts) != 1 || al.Artifacts[0].GetName() != "prodigy-dlq-1-1" || al.Artifacts[0].GetID() != artifactID("prodigy-dlq-1-1") {
		t.Fatalf("artifacts: %+v, %v", al, err)
	}
	loc, _, err := gh.Actions.DownloadArtifact(ctx, "o", "r", al.Artifacts[0].GetID(), 0)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(loc.String())
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "PK-zip" {
		t.Errorf("blob = %q", body)
	}
	// The storage URL refuses the token, as a signed blob URL must be fetched without it.
	req, _ := http.NewRequest(http.MethodGet, loc.String(), nil)
	req.Header.Set("Authorization", "Bearer tok")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusBadRequest {
		t.Errorf("blob with a token: %v %v", resp.StatusCode, err)
	}
	if _, resp, err := gh.Actions.ListWorkflowRunArtifacts(ctx, "o", "r", 2, nil); err == nil || resp.StatusCode != http.StatusNotFound {
		t.Errorf("unknown run: %v", err)
	}
	bad := github.NewClient(nil).WithAuthToken("wrong")
	bad.BaseURL = gh.BaseURL
	if _, resp, err := bad.Issues.ListComments(ctx, "o", "r", 7, nil); err == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("wrong token: %v", err)
	}
	if _, resp, err := gh.Issues.ListComments(ctx, "x", "y", 7, nil); err == nil || resp.StatusCode != http.StatusNotFound {
		t.Errorf("other repository: %v", err)
	}
}
