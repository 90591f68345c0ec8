package jobstore_test

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prodigy-action/prodigy-action/jobstore"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// newJob writes a checkpoint for repo/jobID started at started.
func newJob(t *testing.T, home, repo, jobID string, started time.Time) jobstore.Paths {
	t.Helper()
	p := jobstore.Paths{Home: home, Repo: repo, JobID: jobID}
	cp := &jobstore.Checkpoint{CheckpointHead: jobstore.CheckpointHead{FormatVersion: jobstore.CheckpointFormat, JobID: jobID, Repo: repo, StartedAt: started,
		Status: jobstore.StatusRunning, Phase: jobstore.PhaseSetup, Vars: map[string]string{}}}
	if err := jobstore.NewState(p, cp, func() time.Time { return started }).Update(func(*jobstore.Checkpoint) {}); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestValidJobID(t *testing.T) {
	for _, ok := range []string{"job-1", "mapreduce-20260102_030405-abc123", "a.b_c"} {
		if err := jobstore.ValidJobID(ok); err != nil {
			t.Errorf("ValidJobID(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"", "../x", "a/b", ".hidden", "a..b", "x.lock", "latest", strings.Repeat("a", 129), "a\x00"} {
		err := jobstore.ValidJobID(bad)
		if !errors.Is(err, jobstore.ErrInvalidJobID) {
			t.Errorf("ValidJobID(%q) = %v, want ErrInvalidJobID", bad, err)
		}
	}
}

func TestSafeNameStaysInItsDirectory(t *testing.T) {
	seen := map[string]string{}
	for _, id := range []string{"item_1", "../x", "/", "a/b", "x\x00y", ".", "..", "", strings.Repeat("é", 300), "item 1", "item_1 "} {
		n := jobstore.SafeName(id)
		if n == "" || n == "." || n == ".." || strings.ContainsAny(n, "/\x00") || len(n) > 120 || !filepath.IsLocal(n) {
			t.Errorf("SafeName(%q) = %q is not one safe path element", id, n)
		}
		if prev, dup := seen[n]; dup {
			t.Errorf("SafeName(%q) = SafeName(%q) = %q", id, prev, n)
		}
		seen[n] = id
	}
	if got := jobstore.SafeName("item_1"); got != "item_1" {
		t.Errorf("tame id renamed to %q", got)
	}
}

func TestFindJob(t *testing.T) {
	home := t.TempDir()
	if _, err := jobstore.FindJob(home, "", ""); !errors.Is(err, jobstore.ErrNoJob) {
		t.Errorf("empty home: %v, want ErrNoJob", err)
	}
	if _, err := jobstore.FindJob(home, "", jobstore.Latest); !errors.Is(err, jobstore.ErrNoJob) {
		t.Errorf("latest in empty home: %v, want ErrNoJob", err)
	}
	a := newJob(t, home, "r1", "job-a", t0.Add(2*time.Hour))
	if p, err := jobstore.FindJob(home, "", ""); err != nil || p != a {
		t.Errorf("only job = %v, %v", p, err)
	}
	b := newJob(t, home, "r1", "job-b", t0)
	c := newJob(t, home, "r2", "job-c", t0.Add(3*time.Hour))
	newJob(t, home, "r2", "job-a", t0)

	if _, err := jobstore.FindJob(home, "", ""); !errors.Is(err, jobstore.ErrAmbiguousJob) || !strings.Contains(err.Error(), "job-b") {
		t.Errorf("several jobs: %v, want ErrAmbiguousJob listing them", err)
	}
	if _, err := jobstore.FindJob(home, "", "job-a"); !errors.Is(err, jobstore.ErrAmbiguousJob) {
		t.Errorf("id in two repos: %v, want ErrAmbiguousJob", err)
	}
	if p, err := jobstore.FindJob(home, "r1", "job-a"); err != nil || p != a {
		t.Errorf("job-a of r1 = %v, %v", p, err)
	}
	if p, err := jobstore.FindJob(home, "", "job-b"); err != nil || p != b {
		t.Errorf("job-b = %v, %v", p, err)
	}
	if _, err := jobstore.FindJob(home, "r2", "job-b"); !errors.Is(err, jobstore.ErrNoJob) {
		t.Errorf("job-b in r2: %v, want ErrNoJob", err)
	}
	if _, err := jobstore.FindJob(home, "", "../etc"); !errors.Is(err, jobstore.ErrInvalidJobID) {
		t.Errorf("bad id: %v, want ErrInvalidJobID", err)
	}
	// latest: newest started_at of the repository, not the greatest id.
	if p, err := jobstore.FindJob(home, "r1", jobstore.Latest); err != nil || p != a {
		t.Errorf("latest of r1 = %v, %v; want job-a", p, err)
	}
	if p, err := jobstore.FindJob(home, "", jobstore.Latest); err != nil || p != c {
		t.Errorf("latest overall = %v, %v; want job-c", p, err)
	}
	if _, err := jobstore.FindJob(home, "r3", jobstore.Latest); !errors.Is(err, jobstore.ErrNoJob) {
		t.Errorf("latest of an unknown repo: %v, want ErrNoJob", err)
	}
	jobs, err := jobstore.Jobs(home)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range jobs {
		names = append(names, p.Repo+"/"+p.JobID)
	}
	if want := []string{"r1/job-a", "r2/job-a", "r1/job-b", "r2/job-c"}; !reflect.DeepEqual(names, want) {
		t.Errorf("Jobs = %v, want %v", names, want)
	}
}

func TestDLQJobs(t *testing.T) {
	home := t.TempDir()
	if jobs, err := jobstore.DLQJobs(home); jobs != nil || err != nil {
		t.Errorf("no dlq folder: %v, %v", jobs, err)
	}
	for _, d := range []string{"r2/job-b", "r1/job-c", "r1/job-a", "r1/.job-x.cleared-1-2"} {
		if err := os.MkdirAll(filepath.Join(home, "dlq", d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(home, "dlq", "r1", "stray-file"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	jobs, err := jobstore.DLQJobs(home)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range jobs {
		names = append(names, p.Repo+"/"+p.JobID)
		if p.DLQRoot() != filepath.Join(home, "dlq", p.Repo, p.JobID) {
			t.Errorf("DLQRoot = %s", p.DLQRoot())
		}
	}
	if want := []string{"r1/job-a", "r1/job-c", "r2/job-b"}; !reflect.DeepEqual(names, want) {
		t.Errorf("DLQJobs = %v, want %v", names, want)
	}
}

func TestJobLock(t *testing.T) {
	p := jobstore.Paths{Home: t.TempDir(), Repo: "r", JobID: "j"}
	if jobstore.Locked(p) {
		t.Error("Locked before any lock")
	}
	unlock, err := jobstore.LockJob(p)
	if err != nil {
		t.Fatal(err)
	}
	if !jobstore.Locked(p) {
		t.Error("Locked = false while held")
	}
	if _, err := jobstore.LockJob(p); !errors.Is(err, jobstore.ErrJobLocked) || !strings.Contains(err.Error(), "job j is in use by another process") {
		t.Errorf("second LockJob = %v, want ErrJobLocked", err)
	}
	if err := unlock(); err != nil {
		t.Fatal(err)
	}
	if jobstore.Locked(p) {
		t.Error("Locked after unlock")
	}
	unlock, err = jobstore.LockJob(p)
	if err != nil {
		t.Fatalf("relock: %v", err)
	}
	if err := unlock(); err != nil {
		t.Fatal(err)
	}
}

func TestStateWritesCheckpointAndSession(t *testing.T) {
	home := t.TempDir()
	p := jobstore.Paths{Home: home, Repo: "r", JobID: "j"}
	cp := &jobstore.Checkpoint{CheckpointHead: jobstore.CheckpointHead{FormatVersion: jobstore.CheckpointFormat, JobID: "j", Repo: "r", StartedAt: t0,
		Status: jobstore.StatusRunning, Phase: jobstore.PhaseMap, SetupCompleted: true, Vars: map[string]string{}}}
	for i, st := range []jobstore.ItemState{jobstore.ItemMerged, jobstore.ItemDLQ, jobstore.ItemSkipped, jobstore.ItemPending, jobstore.ItemRunning} {
		cp.Items = append(cp.Items, &jobstore.CheckpointItem{ItemOutcome: jobstore.ItemOutcome{ItemID: string(rune('a' + i)), State: st}, Index: i, Data: json.RawMessage(`{}`)})
	}
	s := jobstore.NewState(p, cp, func() time.Time { return t0.Add(time.Minute) })
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			if err := s.Update(func(cp *jobstore.Checkpoint) { cp.Vars["k"] = string(rune('a' + i)) }); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	got, err := jobstore.LoadCheckpoint(p)
	if err != nil {
		t.Fatal(err)
	}
	if got.CheckpointVersion < 1 || got.CheckpointVersion > 20 || !got.UpdatedAt.Equal(t0.Add(time.Minute)) || len(got.Items) != 5 {
		t.Errorf("checkpoint = %+v", got)
	}
	if n := got.Counts(); n != (jobstore.Counts{Total: 5, Merged: 1, Skipped: 1, DLQ: 1, Pending: 1, Running: 1}) {
		t.Errorf("Counts = %+v", n)
	}
	var sess jobstore.Session
	data, err := os.ReadFile(p.Session())
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &sess); err != nil {
		t.Fatal(err)
	}
	if sess.ID != "session-j" || sess.Status != "Running" || sess.MapReduceData.Phase != "Map" ||
		sess.MapReduceData.ProcessedItems != 3 || sess.MapReduceData.FailedItems != 1 {
		t.Errorf("session = %+v %+v", sess, sess.MapReduceData)
	}
	if st, _ := os.Stat(p.Checkpoint()); st.Mode().Perm() != 0o600 {
		t.Errorf("checkpoint mode = %v, want 0600", st.Mode().Perm())
	}
	// A checkpoint of another format is refused.
	got.FormatVersion = 99
	data, _ = json.Marshal(got)
	if err := os.WriteFile(p.Checkpoint(), data, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := jobstore.LoadCheckpoint(p); err == nil || !strings.Contains(err.Error(), "format 99") {
		t.Errorf("LoadCheckpoint of format 99 = %v", err)
	}
	if _, err := jobstore.LoadCheckpoint(jobstore.Paths{Home: home, Repo: "r", JobID: "nope"}); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing checkpoint = %v, want fs.ErrNotExist", err)
	}
}

func TestOrphanRegistry(t *testing.T) {
	home := t.TempDir()
	p := jobstore.Paths{Home: home, Repo: "r", JobID: "j"}
	reg, err := jobstore.OpenOrphans(p, "/repo")
	if err != nil {
		t.Fatal(err)
	}
	if l := reg.List(); l == nil || len(l) != 0 {
		t.Errorf("empty List = %#v", l)
	}
	o := jobstore.OrphanedWorktree{Path: "/w/1", Branch: "b1", AgentID: "agent-1", ItemID: "i1", FailedAt: t0, Error: "busy"}
	if err := reg.Add(o); err != nil {
		t.Fatal(err)
	}
	o.Error = "still busy"
	if err := reg.Add(o); err != nil {
		t.Fatal(err)
	}
	if err := reg.Add(jobstore.OrphanedWorktree{Path: "/w/2", FailedAt: t0}); err != nil {
		t.Fatal(err)
	}
	reopened, err := jobstore.OpenOrphans(p, "/repo")
	if err != nil {
		t.Fatal(err)
	}
	if l := reopened.List(); len(l) != 2 || l[0].Error != "still busy" {
		t.Errorf("reopened = %+v", l)
	}
	sets, err := jobstore.FindOrphans(home, "")
	if err != nil || len(sets) != 1 || sets[0].RepoDir != "/repo" || sets[0].File != p.Orphans() {
		t.Fatalf("FindOrphans = %+v, %v", sets, err)
	}
	if _, err := jobstore.FindOrphans(home, "../x"); !errors.Is(err, jobstore.ErrInvalidJobID) {
		t.Errorf("FindOrphans(bad id) = %v", err)
	}
	sets[0].Worktrees = nil
	if err := jobstore.SaveOrphans(sets[0].File, sets[0].OrphanFile); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p.Orphans()); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("empty registry not removed: %v", err)
	}
	if sets, err := jobstore.FindOrphans(home, "j"); len(sets) != 0 || err != nil {
		t.Errorf("FindOrphans after clean = %v, %v", sets, err)
	}
}

func TestRemoveJobLeavesOtherJobsAndNoEmptyFolders(t *testing.T) {
	home := t.TempDir()
	keep := newJob(t, home, "r", "keep", t0)
	p := newJob(t, home, "r", "gone", t0)
	if err := jobstore.SaveWorkflowCopy(p, []byte("name: x\n")); err != nil {
		t.Fatal(err)
	}
	f, err := jobstore.OpenEvents(p)
	if err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	reg, _ := jobstore.OpenOrphans(p, "")
	_ = reg.Add(jobstore.OrphanedWorktree{Path: "/w"})
	for _, d := range []string{p.Logs("item 1"), p.AgentWorktree("agent-1"), filepath.Join(p.DLQRoot(), "mapreduce")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := jobstore.RemoveJob(p); err != nil {
		t.Fatal(err)
	}
	var left []string
	_ = filepath.WalkDir(home, func(path string, d fs.DirEntry, err error) error {
		if strings.Contains(path, "gone") {
			left = append(left, path)
		}
		return nil
	})
	if len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}
	if _, err := jobstore.LoadCheckpoint(keep); err != nil {
		t.Errorf("other job damaged: %v", err)
	}
	if _, err := os.Stat(filepath.Join(home, "events")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("empty events folder kept: %v", err)
	}
}

func TestStateJobsIncludesJobsWithoutCheckpoint(t *testing.T) {
	home := t.TempDir()
	newJob(t, home, "r", "done", t0)
	if err := os.MkdirAll(jobstore.Paths{Home: home, Repo: "r", JobID: "crashed"}.JobStateDir(), 0o755); err != nil {
		t.Fatal(err)
	}
	jobs, _ := jobstore.Jobs(home)
	all, _ := jobstore.StateJobs(home)
	if len(jobs) != 1 || jobs[0].JobID != "done" || len(all) != 2 || all[0].JobID != "crashed" {
		t.Errorf("Jobs = %v, StateJobs = %v", jobs, all)
	}
}

// TestItemLogs: an item's attempts by number, each with its output log and
// claude transcript where kept (at AttemptLog and AttemptTranscript); an
// item without output is ErrNoLogs naming the items that have some.
func TestItemLogs(t *testing.T) {
	p := jobstore.Paths{Home: t.TempDir(), Repo: "r", JobID: "j"}
	if _, err := jobstore.ItemLogs(p, "a"); !errors.Is(err, jobstore.ErrNoLogs) || err.Error() != "job j kept no item output (no attempt has run)" {
		t.Errorf("no logs at all: %v", err)
	}
	files := []string{p.AttemptLog("a/1", 2), p.AttemptLog("a/1", 1), p.AttemptTranscript("a/1", 2), filepath.Join(p.Logs("a/1"), "notes.txt")}
	for _, f := range files {
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if got := p.AttemptLog("a/1", 2); got != filepath.Join(p.LogsDir(), jobstore.SafeName("a/1"), "attempt-2.log") {
		t.Errorf("AttemptLog = %s", got)
	}
	got, err := jobstore.ItemLogs(p, "a/1")
	want := []jobstore.AttemptLogs{{Attempt: 1, Log: files[1]}, {Attempt: 2, Log: files[0], Transcript: files[2]}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("ItemLogs = %+v, %v; want %+v", got, err, want)
	}
	_, err = jobstore.ItemLogs(p, "b")
	if wantErr := `job j kept no output for item "b"; items with output: ` + jobstore.SafeName("a/1"); !errors.Is(err, jobstore.ErrNoLogs) || err.Error() != wantErr {
		t.Errorf("an item without logs: %v, want %s", err, wantErr)
	}
}
