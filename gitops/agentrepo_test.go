package gitops

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// agentShell runs script with bash in dir as an agent would: the isolated
// environment, the repository's identity, nothing else.
func agentShell(t *testing.T, dir, script string) string {
	t.Helper()
	cmd := exec.Command("bash", "-c", script)
	cmd.Dir = dir
	cmd.Env = isolatedEnv()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("agent script: %v\n%s", err, out)
	}
	return string(out)
}

// handedOutSlot makes a linked worktree on branch item at main's tip and
// hands it out.
func handedOutSlot(t *testing.T, c *Client, repo string) (*AgentRepo, string) {
	t.Helper()
	base := git(t, repo, "rev-parse", "HEAD")
	slot := filepath.Join(t.TempDir(), "slot")
	if err := c.WorktreeAdd(bg(), slot, "item", base); err != nil {
		t.Fatal(err)
	}
	a, err := c.HandOut(bg(), slot, nil)
	if err != nil {
		t.Fatal(err)
	}
	return a, base
}

// TestAgentGitNeverReachesTheRepository: an agent with a shell in its
// handed-out worktree uses git against "the repository" every way it can —
// a credential helper, url rewrite, filter and merge drivers with
// .gitattributes, hooks, fsmonitor, an include, update-ref of the results
// branch, deleting branches, gc — then commits. After Reclaim the
// repository's configuration, hooks and refs are as before, its commit is
// on the item branch by object id, and none of the planted programs ever
// ran, through the engine's own git commands in the worktree included.
func TestAgentGitNeverReachesTheRepository(t *testing.T) {
	t.Parallel()
	repo, c := newRepo(t, map[string]string{"a.txt": "a\n", "b.txt": "b\n"}, true)
	git(t, repo, "branch", "results")
	git(t, repo, "branch", "other-item")
	configBefore := readFile(t, repo, ".git/config")
	refsBefore := git(t, repo, "for-each-ref")
	a, base := handedOutSlot(t, c, repo)
	ran := filepath.Join(t.TempDir(), "ran")
	payload := "touch " + ran
	out := agentShell(t, a.Dir(), strings.Join([]string{
		`set -e`,
		`test -d .git`,
		`git config credential.helper '!` + payload + `'`,
		`git config url.https://evil.example/.insteadOf https://github.com/`,
		`git config filter.x.clean '` + payload + `; cat'`,
		`git config filter.x.smudge '` + payload + `; cat'`,
		`git config merge.x.driver '` + payload + `'`,
		`git config core.fsmonitor '` + payload + `'`,
		`git config include.path /dev/null`,
		`printf '* filter=x merge=x\n' > .git/info/attributes`,
		`mkdir -p .git/hooks && for h in post-checkout post-merge pre-commit reference-transaction; do printf '#!/bin/sh\n` + payload + `\n' > .git/hooks/$h; chmod +x .git/hooks/$h; done`,
		`git config core.hooksPath .git/hooks`,
		`git update-ref refs/heads/results $(git rev-parse HEAD) 2>/dev/null || git update-ref refs/heads/results HEAD`,
		`git branch -D other-item 2>/dev/null || true`,
		`git config --unset core.fsmonitor`,
		`echo agent > c.txt && git -c core.hooksPath=/dev/null add c.txt && git -c core.hooksPath=/dev/null commit -q -m agent`,
		`git gc -q --prune=now 2>/dev/null || true`,
		`git rev-parse --git-common-dir`,
	}, "\n"))
	if strings.TrimSpace(out) != ".git" {
		t.Fatalf("the agent's git common dir is %q, want its own .git", out)
	}
	rm(t, ran)
	theirs, err := a.Reclaim(bg())
	if err != nil {
		t.Fatal(err)
	}
	if theirs == base {
		t.Fatal("the agent's commit was not taken")
	}
	if got := git(t, repo, "rev-parse", "refs/heads/item"); got != theirs {
		t.Errorf("item branch at %s, want the agent's commit %s", got, theirs)
	}
	if got := git(t, repo, "show", theirs+":c.txt"); got != "agent" {
		t.Errorf("c.txt in the agent's commit = %q", got)
	}
	if got := readFile(t, repo, ".git/config"); got != configBefore {
		t.Errorf("the repository's config changed:\n%s", got)
	}
	if got := strings.Join(filterLines(git(t, repo, "for-each-ref"), "refs/heads/item"), "\n"); got != refsBefore {
		t.Errorf("refs changed:\n%s\nwant\n%s", got, refsBefore)
	}
	// The engine's own git in the reclaimed worktree: status, a reset, a
	// clean, a checkout, a merge.
	if _, err := c.StatusSummary(bg(), a.Dir()); err != nil {
		t.Fatal(err)
	}
	if err := c.ResetWorktree(bg(), a.Dir(), "item2", base); err != nil {
		t.Fatal(err)
	}
	if _, err := c.MergeTree(bg(), "refs/heads/results", theirs, "merge"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(ran); err == nil {
		t.Fatal("a program the agent planted ran")
	}
	if fi, err := os.Lstat(filepath.Join(a.Dir(), ".git")); err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("the worktree's .git file was not restored: %v", err)
	}
}

func filterLines(s, drop string) []string {
	var keep []string
	for _, l := range strings.Split(s, "\n") {
		if !strings.Contains(l, drop) {
			keep = append(keep, l)
		}
	}
	return keep
}

func rm(t *testing.T, p string) {
	t.Helper()
	if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
}

// TestReclaimRefusesWhatIsNotTheAgentsCommit: a replaced repository, a
// HEAD that is not a commit id, a corrupt object and a commit whose objects
// are missing are errors; the worktree is the engine's again every time.
func TestReclaimRefusesWhatIsNotTheAgentsCommit(t *testing.T) {
	t.Parallel()
	cases := map[string]struct{ script, want string }{
		"symlink_to_the_repository": {`rm -rf .git && ln -s "$REPO/.git" .git`, "gone or was replaced"},
		"git_file_to_the_engine":    {`rm -rf .git && echo "gitdir: $REPO/.git" > .git`, "gone or was replaced"},
		"head_not_a_commit":         {`echo 'ref: ../../etc/passwd' > .git/HEAD`, "invalid ref"},
		"head_garbage":              {`echo hello > .git/HEAD`, "not a commit id"},
		"huge_head":                 {`head -c 100000 /dev/zero > .git/HEAD`, "small regular file"},
		"missing_object":            {`echo 0123456789012345678901234567890123456789 > .git/refs/heads/item`, "read the agent's commit"},
		"corrupt_packed_object": {`echo x > f && git add f && git commit -q -m c && git repack -q -a -d && ` +
			`p=$(ls .git/objects/pack/*.pack) && chmod u+w $p && printf 'garbage' | dd of=$p bs=1 seek=40 conv=notrunc status=none`, "agent's"},
		"corrupt_object": {`echo x > f && git add f && git commit -q -m c && o=$(git rev-parse HEAD:f) && ` +
			`p=.git/objects/${o:0:2}/${o:2} && chmod u+w $p && printf 'blob 2\0yy' | python3 -c 'import sys,zlib;sys.stdout.buffer.write(zlib.compress(sys.stdin.buffer.read()))' > $p`, "is corrupt"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			repo, c := newRepo(t, nil, true)
			a, base := handedOutSlot(t, c, repo)
			agentShell(t, a.Dir(), "export REPO="+repo+"\n"+tc.script)
			theirs, err := a.Reclaim(bg())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Reclaim = %q, %v; want an error with %q", theirs, err, tc.want)
			}
			if testing.Verbose() {
				t.Logf("%v", err)
			}
			if fi, err := os.Lstat(filepath.Join(a.Dir(), ".git")); err != nil || !fi.Mode().IsRegular() {
				t.Fatalf("the worktree's .git file was not restored: %v", err)
			}
			if got := git(t, repo, "rev-parse", "refs/heads/item"); got != base {
				t.Errorf("item branch moved to %s", got)
			}
			if err := c.WorktreeRemove(bg(), a.Dir()); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestHandOutKeepsTheRepositorysSettings: the agent's repository has the
// repository's identity, hooks (a user's pre-commit hook runs for the
// agent's commit), excludes and sparse checkout; its first `git status` is
// clean.
func TestHandOutKeepsTheRepositorysSettings(t *testing.T) {
	t.Parallel()
	repo, c := newRepo(t, map[string]string{"a/x.txt": "x\n", "b/y.txt": "y\n"}, true)
	hookLog := filepath.Join(t.TempDir(), "hook.log")
	if err := os.WriteFile(filepath.Join(repo, ".git", "hooks", "pre-commit"), []byte("#!/bin/sh\necho ran >> "+hookLog+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(repo, ".git", "info", "exclude"), []byte("*.tmp\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	a, base := handedOutSlot(t, c, repo)
	out := agentShell(t, a.Dir(), `touch scratch.tmp && git status --porcelain && echo z > a/z.txt && git add -A && git commit -q -m z && git log -1 --format=%an`)
	if strings.TrimSpace(out) != "Repo User" {
		t.Errorf("agent's status/identity output = %q, want a clean status and the repository's user", out)
	}
	if b, _ := os.ReadFile(hookLog); string(b) != "ran\n" {
		t.Errorf("the repository's pre-commit hook ran %q for the agent's commit", b)
	}
	theirs, err := a.Reclaim(bg())
	if err != nil || theirs == base {
		t.Fatalf("Reclaim = %s, %v", theirs, err)
	}
	if err := a.SyncIndex(bg(), theirs); err != nil {
		t.Fatal(err)
	}
	if s, err := c.StatusSummary(bg(), a.Dir()); err != nil || s != "" {
		t.Errorf("engine's status after reclaim = %q, %v; want clean (index moved to the agent's tree)", s, err)
	}
}

// TestReclaimLooksUpOnlyWhatTheAgentChanged: taking back an agent's
// commit that adds one file to a directory of 3,000 looks up a handful of
// objects, not every entry of the directory (it did, and the cost of a
// job's items grew with the number merged before them). The commit is
// still imported whole.
func TestReclaimLooksUpOnlyWhatTheAgentChanged(t *testing.T) {
	files := map[string]string{}
	for i := range 3000 {
		files[fmt.Sprintf("out/item-%04d.txt", i)] = fmt.Sprint(i)
	}
	t.Parallel()
	repo, c := newRepo(t, files, true)
	a, _ := handedOutSlot(t, c, repo)
	agentShell(t, a.Dir(), `mkdir -p out/new && echo new > out/new/one.txt && echo more > out/item-3000.txt && git add out && git commit -qm "one more"`)
	before := c.objects.looked.Load()
	theirs, err := a.Reclaim(bg())
	if err != nil {
		t.Fatal(err)
	}
	// The commit, the root and out/ trees, out/new, its blob and item-3000's blob.
	if looked := c.objects.looked.Load() - before; looked > 8 {
		t.Errorf("looked up %d objects, want at most 8 (what the commit changed)", looked)
	}
	if got := git(t, repo, "cat-file", "-p", theirs+":out/new/one.txt"); got != "new" {
		t.Errorf("out/new/one.txt = %q", got)
	}
	git(t, repo, "fsck", "--no-dangling", "--connectivity-only")
}

// TestWorktreesAreClosedFromTheStart: every way the engine adds a worktree
// makes its directory 0700 before git writes into it, so an agent running
// as a user of its own cannot list or read a slot that is being checked out
// or is not yet handed out (a race CI once caught: an agent listed and read
// a warming pool slot).
func TestWorktreesAreClosedFromTheStart(t *testing.T) {
	t.Parallel()
	repo, c := newRepo(t, map[string]string{"a.txt": "a\n"}, true)
	base := git(t, repo, "rev-parse", "HEAD")
	root := t.TempDir()
	adds := map[string]func(string) error{
		"add":         func(p string) error { return c.WorktreeAdd(bg(), p, "b-add", base) },
		"detached":    func(p string) error { return c.WorktreeAddDetached(bg(), p, base) },
		"no-checkout": func(p string) error { return c.WorktreeAddNoCheckout(bg(), p, "", base) },
		"existing": func(p string) error {
			git(t, repo, "branch", "b-existing", base)
			return c.WorktreeAddExisting(bg(), p, "b-existing")
		},
		"nested/slot": func(p string) error { return c.WorktreeAddDetached(bg(), p, base) },
	}
	for name, add := range adds {
		p := filepath.Join(root, name)
		if err := add(p); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o700 {
			t.Errorf("%s: worktree directory mode %v, want 0700", name, fi.Mode().Perm())
		}
	}
}

// TestHandOutLinksTheIndexGitReplaces: an agent of the engine's own user
// gets the engine's index as a hard link (no copy), and its git — add,
// commit, a tag, gc — replaces that index rather than writing into it: the
// engine's index is the same file with the same bytes afterwards, and the
// agent's commit is taken back.
func TestHandOutLinksTheIndexGitReplaces(t *testing.T) {
	t.Parallel()
	repo, c := newRepo(t, map[string]string{"a.txt": "a\n", "d/b.txt": "b\n"}, true)
	a, base := handedOutSlot(t, c, repo)
	admin := filepath.Join(repo, ".git", "worktrees", "slot", "index")
	before, err := os.ReadFile(admin)
	if err != nil {
		t.Fatal(err)
	}
	adminFI, err := os.Stat(admin)
	if err != nil {
		t.Fatal(err)
	}
	agentFI, err := os.Stat(filepath.Join(a.Dir(), ".git", "index"))
	if err != nil {
		t.Fatal(err)
	}
	if !os.SameFile(adminFI, agentFI) {
		t.Errorf("the agent's index is a copy, not a link of the engine's")
	}
	agentShell(t, a.Dir(), `set -e
echo new > new.txt && echo changed > a.txt
git add -A && git -c user.name=A -c user.email=a@example.com commit -qm agent
git tag v1 && git gc -q`)
	after, err := os.ReadFile(admin)
	if err != nil {
		t.Fatal(err)
	}
	if string(after) != string(before) {
		t.Errorf("the engine's index changed under the agent's git")
	}
	theirs, err := a.Reclaim(bg())
	if err != nil {
		t.Fatal(err)
	}
	if theirs == base || git(t, repo, "show", theirs+":new.txt") != "new" {
		t.Errorf("agent's commit %s not taken back (base %s)", theirs, base)
	}
}
