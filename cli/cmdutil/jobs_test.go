package cmdutil

import (
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/prodigy-action/prodigy-action/gitops/gitopstest"
	"github.com/prodigy-action/prodigy-action/jobstore"
)

// TestRepoNameIsTheCheckoutsStateName: any directory of a checkout names
// the checkout's state (jobstore.RepoKey of its top level); a directory in
// no checkout is an error.
func TestRepoNameIsTheCheckoutsStateName(t *testing.T) {
	t.Parallel()
	repo := gitopstest.Repo(t, map[string]string{})
	sub := filepath.Join(repo, "a", "b")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	f := NewFactory(nil, io.Discard, io.Discard, func(string) string { return "" })
	for _, dir := range []string{repo, sub} {
		if got, err := f.RepoName(home, dir); err != nil || got != "repo" || got != jobstore.RepoKey(home, repo, "") {
			t.Errorf("RepoName(%s) = %q, %v; want repo", dir, got, err)
		}
	}
	if got, err := f.RepoName(home, t.TempDir()); err == nil {
		t.Errorf("RepoName outside a checkout = %q, want an error", got)
	}
}
