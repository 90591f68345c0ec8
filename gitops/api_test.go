package gitops

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestSafeEnvKeepsOnlyWhatGitNeeds(t *testing.T) {
	t.Parallel()
	in := []string{
		"PATH=/bin", "HOME=/h", "LANG=C.UTF-8", "LC_ALL=C", "TMPDIR=/t", "GIT_AUTHOR_NAME=a",
		"GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=safe.directory", "GIT_CONFIG_VALUE_0=/w", "https_proxy=http://p",
		"GIT_TRACE2_EVENT=/x",
		"GITHUB_TOKEN=ghs_x", "API_SECRET=s", "ACTIONS_RUNTIME_TOKEN=r", "AWS_SECRET_ACCESS_KEY=k",
		"INPUT_GITHUB-TOKEN=t", "ANTHROPIC_API_KEY=sk-ant", "SSH_AUTH_SOCK=/tmp/agent", "SOMETHING=else", "malformed",
	}
	got := SafeEnv(in)
	want := in[:11]
	if !slices.Equal(got, want) {
		t.Errorf("SafeEnv = %q\nwant %q", got, want)
	}
}

func TestConfigEnvAppendsAfterExistingEntries(t *testing.T) {
	t.Parallel()
	base := []string{"PATH=/bin", "GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=safe.directory", "GIT_CONFIG_VALUE_0=/w"}
	got := ConfigEnv(base, HTTPAuthConfig("https://github.com/", "tok"))
	basic := base64.StdEncoding.EncodeToString([]byte("x-access-token:tok"))
	want := []string{"PATH=/bin", "GIT_CONFIG_KEY_0=safe.directory", "GIT_CONFIG_VALUE_0=/w",
		"GIT_CONFIG_KEY_1=http.https://github.com/.extraheader", "GIT_CONFIG_VALUE_1=",
		"GIT_CONFIG_KEY_2=http.https://github.com/.extraheader", "GIT_CONFIG_VALUE_2=AUTHORIZATION: basic " + basic,
		"GIT_CONFIG_COUNT=3"}
	if !slices.Equal(got, want) {
		t.Errorf("ConfigEnv = %q\nwant %q", got, want)
	}
	if base[1] != "GIT_CONFIG_COUNT=1" || len(base) != 4 {
		t.Errorf("ConfigEnv changed its input: %q", base)
	}
}

// TestOptionsConfigReachesGit: extra configuration is what git itself
// reads (git config --get), and cannot turn hooks back on.
func TestOptionsConfigReachesGit(t *testing.T) {
	t.Parallel()
	dir, _ := newRepo(t, nil, true)
	c, err := New(dir, Options{Env: isolatedEnv(), Config: []ConfigEntry{
		{"prodigy.test", "from-options"}, {"core.hooksPath", filepath.Join(dir, ".git", "hooks")},
	}})
	if err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]string{"prodigy.test": "from-options", "core.hookspath": os.DevNull, "core.fsmonitor": "false"} {
		out, err := c.run(bg(), "", nil, nil, "config", "--get", key)
		if got := strings.TrimSpace(out); err != nil || got != want {
			t.Errorf("git config --get %s = %q, %v; want %q", key, got, err, want)
		}
	}
	// Per-command config (Push/Fetch) keeps hooks off too.
	r := c.runner.withCommandConfig([]ConfigEntry{{"core.hooksPath", "/tmp"}, {"prodigy.cmd", "x"}})
	out, err := r.run(bg(), dir, nil, nil, "config", "--get", "core.hooksPath")
	if strings.TrimSpace(out) != os.DevNull || err != nil {
		t.Errorf("per-command config: core.hooksPath = %q, %v", out, err)
	}
}

func TestParseTrailers(t *testing.T) {
	t.Parallel()
	tests := []struct {
		msg  string
		want []Trailer
	}{
		{"Merge x (item a)\n\nProdigy-Job: job-1\nProdigy-Item: \"a\"\n",
			[]Trailer{{"Prodigy-Job", "job-1"}, {"Prodigy-Item", `"a"`}}},
		{"subject only: with colon\n", nil},
		{"subject\n\nbody paragraph: with a colon\nand prose\n", nil},
		{"subject\n\nbody\n\nSigned-off-by: A <a@x>\n  continued\nCo-authored-by: B\n",
			[]Trailer{{"Signed-off-by", "A <a@x> continued"}, {"Co-authored-by", "B"}}},
		{"subject\r\n\r\nKey: v\r\n", []Trailer{{"Key", "v"}}},
	}
	for _, tt := range tests {
		if got := ParseTrailers(tt.msg); !slices.Equal(got, tt.want) {
			t.Errorf("ParseTrailers(%q) = %v, want %v", tt.msg, got, tt.want)
		}
	}
	tr := ParseTrailers("s\n\nA: 1\nb: 2\na: 3\n")
	if got := TrailerValues(tr, "a"); !slices.Equal(got, []string{"1", "3"}) {
		t.Errorf("TrailerValues = %v", got)
	}
}

// TestFirstParentLogAgreesWithGit compares the in-process walk with git's
// own `log --first-parent`, trailers included, and with the git fallback.
func TestFirstParentLogAgreesWithGit(t *testing.T) {
	t.Parallel()
	f := newMergeFixture(t)
	for i, name := range []string{"a", "b", "c"} {
		f.agent(t, name, map[string]string{name + ".txt": name})
		msg := fmt.Sprintf("Merge %s\n\nProdigy-Job: j\nProdigy-Item: %q\n", name, name)
		if i == 1 {
			if _, err := f.c.MergeNoFF(bg(), f.parent, name, msg); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if _, err := f.c.MergeTree(bg(), "parent", name, msg); err != nil {
			t.Fatal(err)
		}
		if err := f.c.SyncWorktree(bg(), f.parent); err != nil {
			t.Fatal(err)
		}
	}
	want := strings.Fields(git(t, f.repo, "log", "--first-parent", "--format=%H", f.base+"..parent"))
	gitTrailers := git(t, f.repo, "log", "--first-parent", "--format=%(trailers:key=Prodigy-Item,valueonly)", f.base+"..parent")
	check := func(c *Client, how string) {
		log, err := c.FirstParentLog(bg(), "parent", f.base, 0)
		if err != nil {
			t.Fatalf("%s: %v", how, err)
		}
		var ids, items []string
		for _, cm := range log {
			ids = append(ids, cm.ID)
			items = append(items, TrailerValues(cm.Trailers(), "Prodigy-Item")...)
			if len(cm.Parents) != 2 {
				t.Errorf("%s: %s has parents %v", how, cm.ID, cm.Parents)
			}
		}
		if !slices.Equal(ids, want) {
			t.Errorf("%s: FirstParentLog = %v, git log = %v", how, ids, want)
		}
		if strings.Join(items, " ") != strings.Join(strings.Fields(gitTrailers), " ") {
			t.Errorf("%s: trailers %v, git says %q", how, items, gitTrailers)
		}
		if lim, _ := c.FirstParentLog(bg(), "parent", "", 2); len(lim) != 2 || lim[0].ID != want[0] {
			t.Errorf("%s: limit 2 gave %d commits", how, len(lim))
		}
	}
	check(f.c, "in-process")
	check(withoutGoGit(t, f.c), "git fallback")
}

func TestBranchesCreateAndCommitExists(t *testing.T) {
	t.Parallel()
	dir, c := newRepo(t, nil, true)
	head := git(t, dir, "rev-parse", "HEAD")
	for _, b := range []string{"p/job/1", "p/job/2", "p/other/1"} {
		if err := c.CreateBranch(bg(), b, "main"); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.CreateBranch(bg(), "p/job/1", "main"); err == nil {
		t.Error("CreateBranch of an existing branch succeeded")
	}
	if err := c.CreateBranch(bg(), "-bad", "main"); err == nil {
		t.Error("CreateBranch(-bad) succeeded")
	}
	git(t, dir, "pack-refs", "--all")                             // p/job/1, p/job/2 packed …
	if err := c.CreateBranch(bg(), "p/job/3", head); err != nil { // … p/job/3 loose
		t.Fatal(err)
	}
	for _, cl := range []*Client{c, withoutGoGit(t, c)} {
		got, err := cl.Branches(bg(), "p/job/")
		if want := []string{"p/job/1", "p/job/2", "p/job/3"}; err != nil || !slices.Equal(got, want) {
			t.Errorf("Branches = %v, %v; want %v", got, err, want)
		}
		for rev, want := range map[string]bool{head: true, "main": true, strings.Repeat("1", 40): false, "nope": false} {
			if got, err := cl.CommitExists(bg(), rev); err != nil || got != want {
				t.Errorf("CommitExists(%s) = %v, %v; want %v", rev, got, err, want)
			}
		}
	}
	if err := c.ValidateBranchName(bg(), "a..b"); err == nil {
		t.Error("ValidateBranchName(a..b) = nil")
	}
	if err := c.ValidateBranchName(bg(), "prodigy/job-1"); err != nil {
		t.Error(err)
	}
}

// withoutGoGit opens c's repository again without the in-process reader,
// so every read runs git.
func withoutGoGit(t *testing.T, c *Client) *Client {
	t.Helper()
	cl, err := New(c.TopLevel(), Options{Env: isolatedEnv()})
	if err != nil {
		t.Fatal(err)
	}
	cl.objects = nil
	return cl
}

// TestUnsupportedRepositoryFallsBackToGit: a repository go-git v5 cannot
// read (an unknown extension) is served by git alone, with the same
// answers; worktreeConfig (set by sparse checkouts) stays in-process.
func TestUnsupportedRepositoryFallsBackToGit(t *testing.T) {
	t.Parallel()
	dir, _ := newRepo(t, map[string]string{"d/x.txt": "x", "y.txt": "y"}, true)
	head := git(t, dir, "rev-parse", "HEAD")
	_ = head
	git(t, dir, "config", "core.repositoryformatversion", "1")
	git(t, dir, "config", "extensions.worktreeConfig", "true")
	c, err := New(dir, Options{Env: isolatedEnv()})
	if err != nil || c.objects == nil {
		t.Fatalf("worktreeConfig: New = %v, in-process reader %v; want it kept", err, c != nil && c.objects != nil)
	}
	// SHA-256 objects: go-git v5 (without its sha256 build tag) cannot
	// read them, git can.
	dir = filepath.Join(t.TempDir(), "sha256")
	git(t, filepath.Dir(dir), "init", "-q", "--object-format=sha256", "-b", "main", dir)
	head = commitFiles(t, dir, "initial", map[string]string{"d/x.txt": "x", "y.txt": "y"})
	c, err = New(dir, Options{Env: isolatedEnv()})
	if err != nil {
		t.Fatal(err)
	}
	if c.objects != nil {
		t.Fatal("sha256 repository: go-git reader still used")
	}
	if len(head) != 64 {
		t.Fatalf("head %q is not a SHA-256 id", head)
	}
	if got, err := c.ResolveRef(bg(), "main"); err != nil || got != head {
		t.Errorf("ResolveRef = %q, %v", got, err)
	}
	if got, err := c.Head(bg(), dir); err != nil || got != head {
		t.Errorf("Head = %q, %v", got, err)
	}
	if got, err := c.ListFiles(bg(), "main", "d"); err != nil || !slices.Equal(got, []string{"d/x.txt"}) {
		t.Errorf("ListFiles = %v, %v", got, err)
	}
	if _, err := c.ResolveRef(bg(), "nope"); !errors.Is(err, ErrRefNotFound) {
		t.Errorf("ResolveRef(nope) = %v", err)
	}
	if err := c.CreateBranch(bg(), "b", "main"); err != nil {
		t.Error(err)
	}
	if got, err := c.Branches(bg(), ""); err != nil || !slices.Equal(got, []string{"b", "main"}) {
		t.Errorf("Branches = %v, %v", got, err)
	}
}

func TestListFilesAndLogGraph(t *testing.T) {
	t.Parallel()
	dir, c := newRepo(t, map[string]string{"g/a.txt": "a", "g/sub/b.txt": "b", "top.txt": "t"}, true)
	got, err := c.ListFiles(bg(), "main", "g")
	if want := []string{"g/a.txt", "g/sub/b.txt"}; err != nil || !slices.Equal(got, want) {
		t.Errorf("ListFiles(g) = %v, %v; want %v", got, err, want)
	}
	all, _ := c.ListFiles(bg(), "main", "")
	if want := strings.Fields(git(t, dir, "ls-tree", "-r", "--name-only", "main")); !slices.Equal(all, want) {
		t.Errorf("ListFiles = %v, ls-tree %v", all, want)
	}
	graph, err := c.LogGraph(bg(), "main")
	if err != nil || !strings.Contains(graph, "* ") || !strings.Contains(graph, "initial") {
		t.Errorf("LogGraph = %q, %v", graph, err)
	}
}

func TestInitRepository(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"a.txt": "a"})
	c, err := InitRepository(context.Background(), dir, "main", "first", Identity{"Demo", "demo@example.invalid"}, Options{Env: isolatedEnv()})
	if err != nil {
		t.Fatal(err)
	}
	if got := git(t, dir, "log", "-1", "--format=%an <%ae> %s"); got != "Demo <demo@example.invalid> first" {
		t.Errorf("commit = %q", got)
	}
	if br, _ := c.CurrentBranch(bg(), dir); br != "main" {
		t.Errorf("branch = %q", br)
	}
}

// TestPushAndFetch against a local bare remote, with per-command config.
func TestPushAndFetch(t *testing.T) {
	t.Parallel()
	dir, c := newRepo(t, nil, true)
	remote := filepath.Join(t.TempDir(), "r.git")
	git(t, filepath.Dir(remote), "init", "-q", "--bare", remote)
	git(t, dir, "remote", "add", "origin", remote)
	if err := c.Push(bg(), "origin", []string{"refs/heads/main:refs/heads/pushed"}, HTTPAuthConfig("https://example.invalid", "tok")); err != nil {
		t.Fatal(err)
	}
	if got := git(t, remote, "rev-parse", "pushed"); got != git(t, dir, "rev-parse", "main") {
		t.Errorf("remote pushed = %s", got)
	}
	if err := c.Fetch(bg(), "origin", []string{"refs/heads/pushed:refs/heads/fetched"}, nil); err != nil {
		t.Fatal(err)
	}
	if ok, _ := c.BranchExists(bg(), "fetched"); !ok {
		t.Error("fetched branch missing")
	}
	err := c.Push(bg(), "--upload-pack=evil", nil, nil)
	if err == nil || !strings.Contains(err.Error(), "invalid remote") {
		t.Errorf("Push(option as remote) = %v", err)
	}
	var ge *GitError
	if err := c.Fetch(bg(), "nosuchremote", nil, nil); !errors.As(err, &ge) {
		t.Errorf("Fetch(nosuchremote) = %v, want a GitError", err)
	}
}

// TestReadsSurviveARepack: objects that git moves into a new pack after
// the Client read from the old one are still found in-process.
func TestReadsSurviveARepack(t *testing.T) {
	t.Parallel()
	dir, c := newRepo(t, nil, true)
	git(t, dir, "gc", "-q")
	first := git(t, dir, "rev-parse", "HEAD")
	if _, ok := c.objects.tree(first); !ok { // loads the pack index
		t.Fatal("packed commit not read")
	}
	second := commitFiles(t, dir, "second", map[string]string{"b.txt": "b"})
	git(t, dir, "repack", "-q", "-a", "-d")
	for _, oid := range []string{first, second} {
		if _, ok := c.objects.tree(oid); !ok {
			t.Errorf("commit %s not read after a repack", oid)
		}
	}
}
