package guard_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prodigy-action/prodigy-action/gitops"
	"github.com/prodigy-action/prodigy-action/jobstore"
	"github.com/prodigy-action/prodigy-action/runner/guard"
	"github.com/prodigy-action/prodigy-action/runner/runnertest"
)

// fixture is a repository whose results branch holds two item merges
// above the verified tip, as the engine leaves it, and a guard over it.
type fixture struct {
	repo      *runnertest.Repo
	g         *guard.Guard
	state     *jobstore.State
	paths     jobstore.Paths
	base, ver string
	merges    []string // the items' merge commits, oldest first
	unmerged  []string
	warnings  []string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	r := runnertest.NewRepo(t, nil)
	f := &fixture{repo: r}
	f.base = r.Git("rev-parse", "HEAD")
	r.Git("branch", "results")
	commit := func(msg string) string {
		r.Git("-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-q", "--allow-empty", "-m", msg)
		return r.Git("rev-parse", "HEAD")
	}
	r.Git("checkout", "-q", "results")
	f.ver = commit("setup")
	f.merges = []string{commit("merge item a"), commit("merge item b")}
	r.Git("checkout", "-q", "main")

	paths := jobstore.Paths{Home: r.Home, Repo: "repo", JobID: "job1"}
	if err := os.MkdirAll(paths.JobStateDir(), 0o755); err != nil {
		t.Fatal(err)
	}
	cp := &jobstore.Checkpoint{CheckpointHead: jobstore.CheckpointHead{JobID: "job1", BaseCommit: f.base, ResultsVerified: f.ver}}
	for i, id := range []string{"a", "b"} {
		it := &jobstore.CheckpointItem{Index: i, MergeCommit: f.merges[i]}
		it.ItemID, it.State = id, jobstore.ItemMerged
		cp.Items = append(cp.Items, it)
	}
	f.paths, f.state = paths, jobstore.NewState(paths, cp, time.Now)
	git, err := gitops.New(r.Dir, gitops.Options{})
	if err != nil {
		t.Fatal(err)
	}
	f.g = &guard.Guard{
		Git: git, State: f.state, JobID: "job1", Branch: "results",
		ParentDir: filepath.Join(t.TempDir(), "no-parent"),
		Warn:      func(m string) { f.warnings = append(f.warnings, m) },
		Unmerge: func(row *jobstore.CheckpointItem, why string) error {
			f.unmerged = append(f.unmerged, row.ItemID)
			return f.state.UpdateItem(row, func(*jobstore.Checkpoint) { row.State = jobstore.ItemPending; row.MergeCommit = "" })
		},
		Persisted: func(what string, err error) {
			if err != nil {
				t.Errorf("%s: %v", what, err)
			}
		},
	}
	return f
}

func TestCheckPassesTheBranchAsTheEngineLeftIt(t *testing.T) {
	f := newFixture(t)
	f.g.AuditBaseline(context.Background())
	tip, fresh, err := f.g.Check(context.Background())
	if err != nil || fresh || tip != f.merges[1] {
		t.Fatalf("Check = %q, %v, %v; want the tip %s and no error", tip, fresh, err, f.merges[1])
	}
	if len(f.unmerged) != 0 || len(f.warnings) != 0 {
		t.Fatalf("unmerged %v, warnings %v; want none", f.unmerged, f.warnings)
	}
}

// A rewind below the verified tip: the job fails with what happened and
// what to do, every merged item above what is still trusted is pending
// again, and the failure is remembered (later checks return it, not fresh).
func TestCheckFindsARewoundBranchAndPutsItsItemsBack(t *testing.T) {
	f := newFixture(t)
	f.repo.Git("update-ref", "refs/heads/results", f.base)
	tip, fresh, err := f.g.Check(context.Background())
	if !errors.Is(err, guard.ErrIntegrity) || !fresh || tip != "" {
		t.Fatalf("Check = %q, %v, %v; want a fresh ErrIntegrity and no tip", tip, fresh, err)
	}
	for _, want := range []string{"no longer on it", "rewound", "2 item(s)", "resume job1"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if !sameIDs(f.unmerged, "a", "b") {
		t.Errorf("unmerged %v, want [a b]", f.unmerged)
	}
	_, fresh2, err2 := f.g.Check(context.Background())
	if err2 != err || fresh2 {
		t.Errorf("second Check = %v (fresh %v), want the remembered failure, not fresh", err2, fresh2)
	}
}

// A commit an agent added above the verified tip, made to look like a
// merge: everything above the verified tip is untrusted, and the error
// names the command that moves the branch back.
func TestCheckFindsACommitTheEngineDidNotMake(t *testing.T) {
	f := newFixture(t)
	f.repo.Git("checkout", "-q", "results")
	f.repo.Git("-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-q", "--allow-empty", "-m", "merge item c")
	f.repo.Git("checkout", "-q", "main")
	_, _, err := f.g.Check(context.Background())
	if !errors.Is(err, guard.ErrIntegrity) {
		t.Fatalf("Check error = %v, want ErrIntegrity", err)
	}
	for _, want := range []string{"1 commit(s) the engine did not make", "git update-ref refs/heads/results " + f.ver} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if !sameIDs(f.unmerged, "a", "b") {
		t.Errorf("unmerged %v, want [a b] (above the verified tip nothing is trusted)", f.unmerged)
	}
}

// A credential helper added to the repository's configuration while the
// agents ran (the push-token theft of issue 22) fails the check; with the
// branch intact, no item goes back.
func TestCheckFindsGitConfigurationAddedAfterTheBaseline(t *testing.T) {
	f := newFixture(t)
	f.g.AuditBaseline(context.Background())
	f.repo.Git("config", "credential.helper", "!cat >/tmp/stolen")
	_, _, err := f.g.Check(context.Background())
	if !errors.Is(err, guard.ErrIntegrity) || !strings.Contains(err.Error(), "credential.helper") {
		t.Fatalf("Check error = %v, want ErrIntegrity naming credential.helper", err)
	}
	if len(f.unmerged) != 0 {
		t.Errorf("unmerged %v, want none", f.unmerged)
	}
}

// NeedsVerifiedTip: a job that recorded nothing verified and merged
// nothing starts from a tip no agent touched; MarkVerified records one.
func TestMarkVerifiedRecordsTheTip(t *testing.T) {
	f := newFixture(t)
	if f.g.NeedsVerifiedTip() {
		t.Fatal("NeedsVerifiedTip = true with a verified tip recorded")
	}
	f.state.Read(func(cp *jobstore.Checkpoint) { // the test's own change, under the state's lock
		cp.ResultsVerified = ""
		for _, it := range cp.Items {
			it.State = jobstore.ItemPending
		}
	})
	if !f.g.NeedsVerifiedTip() {
		t.Fatal("NeedsVerifiedTip = false with nothing verified and nothing merged")
	}
	if err := f.g.MarkVerified(f.merges[1]); err != nil {
		t.Fatal(err)
	}
	cp, err := jobstore.LoadCheckpoint(f.paths)
	if err != nil {
		t.Fatal(err)
	}
	if cp.ResultsVerified != f.merges[1] {
		t.Fatalf("checkpoint results_verified = %q, want %s", cp.ResultsVerified, f.merges[1])
	}
}

// sameIDs reports whether got holds exactly want, in any order (the guard
// walks a map).
func sameIDs(got []string, want ...string) bool {
	g := slices.Clone(got)
	slices.Sort(g)
	return slices.Equal(g, want)
}
