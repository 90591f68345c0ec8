package gitops

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

func TestIdentityEnv(t *testing.T) {
	t.Parallel()
	bot := []string{
		"GIT_AUTHOR_NAME=prodigy-action[bot]", "GIT_AUTHOR_EMAIL=prodigy-action@users.noreply.github.com",
		"GIT_COMMITTER_NAME=prodigy-action[bot]", "GIT_COMMITTER_EMAIL=prodigy-action@users.noreply.github.com",
	}
	tests := []struct {
		name     string
		config   [][2]string
		env      []string
		identity *Identity
		want     []string
	}{
		{name: "nothing_configured", want: bot},
		{name: "user_configured", config: [][2]string{{"user.name", "U"}, {"user.email", "u@x"}}, want: nil},
		{name: "only_name", config: [][2]string{{"user.name", "U"}}, want: []string{bot[1], bot[3]}},
		{name: "author_and_committer_keys", config: [][2]string{{"author.name", "A"}, {"author.email", "a@x"}},
			want: []string{bot[2], bot[3]}},
		{name: "env_vars_win", env: []string{"GIT_AUTHOR_NAME=E", "EMAIL=e@x"}, want: []string{bot[2]}},
		{name: "custom_identity", identity: &Identity{Name: "Bot", Email: "bot@x"},
			want: []string{"GIT_AUTHOR_NAME=Bot", "GIT_AUTHOR_EMAIL=bot@x", "GIT_COMMITTER_NAME=Bot", "GIT_COMMITTER_EMAIL=bot@x"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir, _ := newRepo(t, nil, false)
			for _, kv := range tt.config {
				git(t, dir, "config", kv[0], kv[1])
			}
			c, err := New(dir, Options{Env: append(isolatedEnv(), tt.env...), Identity: tt.identity})
			if err != nil {
				t.Fatal(err)
			}
			got, err := c.IdentityEnv(bg())
			if err != nil || !slices.Equal(got, tt.want) {
				t.Errorf("IdentityEnv() = %q, %v; want %q", got, err, tt.want)
			}
			// Cached and not aliased.
			if len(got) > 0 {
				got[0] = "mutated"
			}
			again, _ := c.IdentityEnv(bg())
			if !slices.Equal(again, tt.want) {
				t.Errorf("second IdentityEnv() = %q, want %q", again, tt.want)
			}
		})
	}
}

// TestNoIdentityRunner simulates a fresh CI runner (no global or system
// config, no identity anywhere): a commit made with IdentityEnv works, and
// merges in both modes carry the bot identity.
func TestNoIdentityRunner(t *testing.T) {
	t.Parallel()
	dir, c := newRepo(t, nil, false)
	idEnv, err := c.IdentityEnv(bg())
	if err != nil || len(idEnv) != 4 {
		t.Fatalf("IdentityEnv = %q, %v", idEnv, err)
	}
	// A commit without identity fails on such a runner (the precondition)…
	git(t, dir, "checkout", "-q", "-b", "agent")
	writeFiles(t, dir, map[string]string{"agent.txt": "a"})
	git(t, dir, "add", "agent.txt")
	cmd := exec.Command("git", "-C", dir, "-c", "user.useConfigOnly=true", "commit", "-q", "-m", "agent")
	cmd.Env = isolatedEnv()
	if out, err := cmd.CombinedOutput(); err == nil {
		t.Fatalf("commit without identity succeeded (%s); the test would prove nothing", out)
	}
	// …and succeeds with IdentityEnv.
	cmd = exec.Command("git", "-C", dir, "-c", "user.useConfigOnly=true", "commit", "-q", "-m", "agent")
	cmd.Env = append(isolatedEnv(), idEnv...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("commit with IdentityEnv: %v: %s", err, out)
	}
	git(t, dir, "checkout", "-q", "main")
	git(t, dir, "branch", "tree-target", "main")

	head, err := c.MergeNoFF(bg(), dir, "agent", "Merge agent")
	if err != nil {
		t.Fatalf("MergeNoFF: %v", err)
	}
	treeHead, err := c.MergeTree(bg(), "tree-target", "agent", "Merge agent")
	if err != nil {
		t.Fatalf("MergeTree: %v", err)
	}
	for _, commit := range []string{head, treeHead} {
		who := git(t, dir, "log", "-1", "--format=%an <%ae>|%cn <%ce>", commit)
		want := "prodigy-action[bot] <prodigy-action@users.noreply.github.com>"
		if who != want+"|"+want {
			t.Errorf("merge %s author|committer = %q, want the bot", commit, who)
		}
	}
}

func TestConfiguredIdentityIsKept(t *testing.T) {
	t.Parallel()
	dir, c := newRepo(t, nil, true)
	git(t, dir, "branch", "agent")
	git(t, dir, "worktree", "add", "-q", dir+"-agent", "agent")
	commitFiles(t, dir+"-agent", "agent work", map[string]string{"a.txt": "a"})
	head, err := c.MergeNoFF(bg(), dir, "agent", "")
	if err != nil {
		t.Fatal(err)
	}
	who := git(t, dir, "log", "-1", "--format=%an <%ae>|%s", head)
	if !strings.HasPrefix(who, "Repo User <repo.user@example.com>|Merge branch 'agent'") {
		t.Errorf("merge commit = %q, want the configured user and default message", who)
	}
}
