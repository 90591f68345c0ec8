package gitops

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestBundleRoundTripIntoAClone(t *testing.T) {
	ctx := context.Background()
	dir, c := newRepo(t, nil, true)
	git(t, dir, "checkout", "-q", "-b", "feature")
	commitFiles(t, dir, "one", map[string]string{"a.txt": "1\n"})
	tip := commitFiles(t, dir, "two", map[string]string{"b.txt": "2\n"})
	git(t, dir, "checkout", "-q", "main")
	main := git(t, dir, "rev-parse", "main")

	bundle := filepath.Join(t.TempDir(), "f.bundle")
	if err := c.BundleCreate(ctx, bundle, "refs/heads/feature", main); err != nil {
		t.Fatal(err)
	}
	heads, err := c.BundleHeads(ctx, bundle)
	if err != nil || heads["refs/heads/feature"] != tip || len(heads) != 1 {
		t.Fatalf("heads = %v, %v; want feature at %s", heads, err, tip)
	}

	clone := filepath.Join(t.TempDir(), "clone")
	git(t, filepath.Dir(clone), "clone", "-q", "--no-local", "--single-branch", "-b", "main", dir, clone)
	cc, err := New(clone, Options{Env: isolatedEnv()})
	if err != nil {
		t.Fatal(err)
	}
	if cc.HasCommit(ctx, tip) {
		t.Fatal("the clone already has the feature commit; the test proves nothing")
	}
	if err := cc.FetchBundle(ctx, bundle, "refs/heads/feature", "refs/prodigy-base/x"); err != nil {
		t.Fatal(err)
	}
	if got, err := cc.ResolveRef(ctx, "refs/prodigy-base/x"); err != nil || got != tip || !cc.HasCommit(ctx, tip) {
		t.Fatalf("fetched ref = %s, %v; want %s", got, err, tip)
	}
}

func TestBundleCreateRefusesAnEmptyBundle(t *testing.T) {
	ctx := context.Background()
	dir, c := newRepo(t, nil, true)
	main := git(t, dir, "rev-parse", "main")
	bundle := filepath.Join(t.TempDir(), "e.bundle")
	err := c.BundleCreate(ctx, bundle, "refs/heads/main", main)
	if !errors.Is(err, ErrEmptyBundle) {
		t.Fatalf("err = %v, want ErrEmptyBundle", err)
	}
	if _, err := os.Stat(bundle); !os.IsNotExist(err) {
		t.Fatalf("an empty bundle was written: %v", err)
	}
}

func TestFetchBundleRejectsACorruptBundle(t *testing.T) {
	ctx := context.Background()
	_, c := newRepo(t, nil, true)
	bundle := filepath.Join(t.TempDir(), "bad.bundle")
	if err := os.WriteFile(bundle, []byte("# v2 git bundle\nnot a bundle\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := c.FetchBundle(ctx, bundle, "refs/heads/main", "refs/prodigy-base/x"); err == nil {
		t.Fatal("a corrupt bundle was fetched")
	}
	if _, err := c.ResolveRef(ctx, "refs/prodigy-base/x"); err == nil {
		t.Fatal("the destination ref exists after a failed fetch")
	}
}

// TestReplayMergeAppliesOnlyThatMerge builds a branch of two --no-ff
// merges on main and a target that changed a.txt differently: replaying
// the first merge conflicts and changes nothing; replaying the second
// brings only its file, as one commit with the merge's message.
func TestReplayMergeAppliesOnlyThatMerge(t *testing.T) {
	ctx := context.Background()
	dir, c := newRepo(t, map[string]string{"a.txt": "base\n"}, true)
	git(t, dir, "checkout", "-q", "-b", "shard")
	git(t, dir, "checkout", "-q", "-b", "agent1")
	commitFiles(t, dir, "agent 1", map[string]string{"a.txt": "agent\n"})
	git(t, dir, "checkout", "-q", "shard")
	git(t, dir, "merge", "-q", "--no-ff", "-m", "Merge agent1\n\nProdigy-Item: \"a\"", "agent1")
	m1 := git(t, dir, "rev-parse", "HEAD")
	git(t, dir, "checkout", "-q", "-b", "agent2")
	commitFiles(t, dir, "agent 2", map[string]string{"c.txt": "new\n"})
	git(t, dir, "checkout", "-q", "shard")
	git(t, dir, "merge", "-q", "--no-ff", "-m", "Merge agent2\n\nProdigy-Item: \"c\"", "agent2")
	m2 := git(t, dir, "rev-parse", "HEAD")
	git(t, dir, "checkout", "-q", "-b", "target", "main")
	old := commitFiles(t, dir, "target", map[string]string{"a.txt": "target\n"})
	git(t, dir, "checkout", "-q", "main")

	merges, err := c.FirstParentMerges(ctx, git(t, dir, "rev-parse", "main"), "refs/heads/shard")
	if err != nil || len(merges) != 2 || merges[0].OID != m1 || merges[1].OID != m2 || !strings.Contains(merges[1].Message, `Prodigy-Item: "c"`) {
		t.Fatalf("merges = %+v, %v", merges, err)
	}

	_, err = c.ReplayMerge(ctx, "target", m1, "item a", merges[0].Message)
	var mc *MergeConflictError
	if !errors.As(err, &mc) || len(mc.Files) != 1 || mc.Files[0] != "a.txt" {
		t.Fatalf("replay of the conflicting merge: %v", err)
	}
	if now := git(t, dir, "rev-parse", "target"); now != old {
		t.Fatal("a conflicting replay moved the target")
	}
	commit, err := c.ReplayMerge(ctx, "target", m2, "item c", merges[1].Message)
	if err != nil {
		t.Fatal(err)
	}
	if got := git(t, dir, "rev-parse", "target"); got != commit {
		t.Fatalf("target at %s, want %s", got, commit)
	}
	if parents := git(t, dir, "rev-list", "--parents", "-n1", commit); parents != commit+" "+old {
		t.Fatalf("replayed commit parents: %s", parents)
	}
	if got := git(t, dir, "show", "target:a.txt") + "|" + git(t, dir, "show", "target:c.txt"); got != "target|new" {
		t.Fatalf("target files = %q", got)
	}
	if msg := git(t, dir, "log", "-1", "--format=%B", "target"); !strings.Contains(msg, `Prodigy-Item: "c"`) {
		t.Fatalf("message = %q", msg)
	}
}

// TestFetchBundleRefusesWhatGitFetchWould: a bundle whose prerequisite the
// repository lacks, one whose pack leaves out objects its tip reaches (its
// prerequisite line removed by hand), a header that is not a bundle's, a
// v3 capability other than SHA-1 and a ref the bundle does not carry are
// all refused, and the destination ref is never written.
func TestFetchBundleRefusesWhatGitFetchWould(t *testing.T) {
	ctx := context.Background()
	dir, c := newRepo(t, map[string]string{"a.txt": "a\n"}, true)
	git(t, dir, "checkout", "-q", "-b", "feature")
	mid := commitFiles(t, dir, "mid", map[string]string{"b.txt": "b\n"})
	commitFiles(t, dir, "tip", map[string]string{"c.txt": "c\n"})
	git(t, dir, "checkout", "-q", "main")
	good := filepath.Join(t.TempDir(), "good.bundle")
	if err := c.BundleCreate(ctx, good, "refs/heads/feature", mid); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, b []byte) string {
		p := filepath.Join(t.TempDir(), name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// The same pack without its prerequisite line: it no longer says that
	// mid's objects must be there, and they are not.
	header, pack, _ := strings.Cut(string(data), "\n\n")
	var kept []string
	for _, l := range strings.Split(header, "\n") {
		if !strings.HasPrefix(l, "-"+mid) {
			kept = append(kept, l)
		}
	}
	noPrereq := write("noprereq.bundle", []byte(strings.Join(kept, "\n")+"\n\n"+pack))
	if string(data) == string(mustRead(t, noPrereq)) {
		t.Fatal("the bundle has no prerequisite line; the test proves nothing")
	}
	v3 := write("v3.bundle", []byte(strings.Replace(string(data), "# v2 git bundle\n", "# v3 git bundle\n@filter=blob:none\n", 1)))
	huge := write("huge.bundle", []byte("# v2 git bundle\n-"+strings.Repeat("a", 2<<20)+"\n"))

	// A clone of main only: it lacks mid (feature's first commit).
	clone := filepath.Join(t.TempDir(), "clone")
	git(t, filepath.Dir(clone), "clone", "-q", "--no-local", "--single-branch", "-b", "main", dir, clone)
	cc, err := New(clone, Options{Env: isolatedEnv()})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, path, src, want string
	}{
		{"missing prerequisite", good, "refs/heads/feature", "lacks commit " + mid},
		{"objects left out", noPrereq, "refs/heads/feature", "is not complete"},
		{"object filter", v3, "refs/heads/feature", `capability "@filter=blob:none"`},
		{"header too large", huge, "refs/heads/feature", "header is too large"},
		{"no such ref", good, "refs/heads/other", "no ref refs/heads/other"},
	} {
		err := cc.FetchBundle(ctx, tt.path, tt.src, "refs/prodigy-base/x")
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err = %v, want %q", tt.name, err, tt.want)
		}
		if _, err := cc.ResolveRef(ctx, "refs/prodigy-base/x"); err == nil {
			t.Fatalf("%s: the destination ref was written", tt.name)
		}
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
