package dlq

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

var base = at("2025-01-11T10:00:00Z")

func openTest(t *testing.T, home string, o Options) *Store {
	t.Helper()
	if o.Warn == nil {
		o.Warn = func(m string) { t.Logf("warn: %s", m) }
	}
	if o.Now == nil {
		o.Now = func() time.Time { return base }
	}
	s, err := Open(jobRoot(home, "repo", "job-1"), "job-1", o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	return s
}

// rec builds a record whose single failure happened minute minutes after base.
func rec(id string, minute int) DeadLetteredItem {
	ts := base.Add(time.Duration(minute) * time.Minute)
	return *FromAgentResult(AgentResult{ItemID: id, ItemData: json.RawMessage(`{"n":1}`), Status: StatusFailed,
		Failures: []Failure{{At: ts, Message: "make failed with exit code 2", AgentID: "agent-1", Step: "shell: make"}}})
}

// readIndexFile flushes s and parses its index.json.
func readIndexFile(t *testing.T, s *Store) indexFile {
	t.Helper()
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(s.Dir(), "index.json"))
	if err != nil {
		t.Fatal(err)
	}
	var f indexFile
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatalf("index.json: %v\n%s", err, b)
	}
	return f
}

// assertAgree checks that index.json lists exactly the records in items/.
func assertAgree(t *testing.T, s *Store) []string {
	t.Helper()
	ix := readIndexFile(t, s)
	var onDisk []string
	err := s.Each(func(d DeadLetteredItem) error { onDisk = append(onDisk, d.ItemID); return nil })
	if err != nil {
		t.Fatal(err)
	}
	got := append([]string(nil), ix.ItemIDs...)
	sort.Strings(got)
	sort.Strings(onDisk)
	if ix.ItemCount != len(ix.ItemIDs) || !reflect.DeepEqual(got, onDisk) {
		t.Fatalf("index.json (%d, %d ids) disagrees with items/ (%d)", ix.ItemCount, len(ix.ItemIDs), len(onDisk))
	}
	return onDisk
}

func TestOpenCreatesNothing(t *testing.T) {
	home := t.TempDir()
	s := openTest(t, home, Options{})
	if n, err := s.Count(); n != 0 || err != nil {
		t.Errorf("Count = %d, %v", n, err)
	}
	if err := s.Each(func(DeadLetteredItem) error { t.Error("visited"); return nil }); err != nil {
		t.Error(err)
	}
	if _, err := s.Get("x"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get = %v, want ErrNotFound", err)
	}
	if err := s.Remove("x"); err != nil {
		t.Error(err)
	}
	if n, err := s.Purge(base); n != 0 || err != nil {
		t.Errorf("Purge = %d, %v", n, err)
	}
	if err := s.Clear(); err != nil {
		t.Error(err)
	}
	if entries, _ := os.ReadDir(home); len(entries) != 0 {
		t.Errorf("reading created state: %v", entries)
	}
	for _, bad := range []string{"", "..", ".", "a/b", `a\b`, ".j", "x\x00"} {
		if _, err := Open(home, bad, Options{}); err == nil {
			t.Errorf("Open(%q) accepted an unsafe job id", bad)
		}
	}
	if _, err := Open("", "j", Options{}); err == nil {
		t.Error("Open accepted an empty directory")
	}
}

func TestAddGetRemove(t *testing.T) {
	home := t.TempDir()
	s := openTest(t, home, Options{})
	for i, id := range []string{"item-2", "item-1", "item-3"} {
		if _, err := s.Add(rec(id, i)); err != nil {
			t.Fatal(err)
		}
	}
	if got := Dir(jobRoot(home, "repo", "job-1"), "job-1"); s.Dir() != got || !strings.HasSuffix(got, filepath.Join("dlq", "repo", "job-1", "mapreduce", "dlq", "job-1")) {
		t.Errorf("Dir = %s", s.Dir())
	}
	ix := readIndexFile(t, s)
	if ix.JobID != "job-1" || ix.ItemCount != 3 || !reflect.DeepEqual(ix.ItemIDs, []string{"item-2", "item-1", "item-3"}) || !ix.UpdatedAt.Equal(base) {
		t.Errorf("index.json = %+v", ix)
	}
	d, err := s.Get("item-1")
	if err != nil || d.ItemID != "item-1" || d.FailureCount != 1 {
		t.Fatalf("Get = %+v, %v", d, err)
	}
	if err := s.Remove("item-1"); err != nil {
		t.Fatal(err)
	}
	if err := s.Remove("item-1"); err != nil {
		t.Fatalf("second Remove: %v", err)
	}
	if _, err := s.Get("item-1"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get after Remove = %v", err)
	}
	if ids := assertAgree(t, s); !reflect.DeepEqual(ids, []string{"item-2", "item-3"}) {
		t.Errorf("ids = %v", ids)
	}
	if ix := readIndexFile(t, s); !reflect.DeepEqual(ix.ItemIDs, []string{"item-2", "item-3"}) {
		t.Errorf("index order = %v", ix.ItemIDs)
	}
}

func TestAddAppendsHistory(t *testing.T) {
	s := openTest(t, t.TempDir(), Options{})
	first := rec("item-1", 0)
	first.FailureHistory = append(first.FailureHistory, first.FailureHistory[0])
	first.FailureHistory[1].AttemptNumber = 2
	first.FailureCount = 2
	if _, err := s.Add(first); err != nil {
		t.Fatal(err)
	}
	later := *FromAgentResult(AgentResult{ItemID: "item-1", Status: StatusTimeout,
		Failures:     []Failure{{Attempt: 1, At: base.Add(time.Hour), Message: "killed after 30s"}},
		WorktreePath: "/w2", BranchName: "b2"})
	got, err := s.Add(later)
	if err != nil {
		t.Fatal(err)
	}
	if got.FailureCount != 3 || len(got.FailureHistory) != 3 {
		t.Fatalf("count/history = %d/%d, want 3/3", got.FailureCount, len(got.FailureHistory))
	}
	attempts := []uint32{got.FailureHistory[0].AttemptNumber, got.FailureHistory[1].AttemptNumber, got.FailureHistory[2].AttemptNumber}
	if !reflect.DeepEqual(attempts, []uint32{1, 2, 1}) {
		t.Errorf("attempt numbers = %v, want kept as given [1 2 1]", attempts)
	}
	if !got.FirstAttempt.Equal(base) || !got.LastAttempt.Equal(base.Add(time.Hour)) {
		t.Errorf("first/last = %v/%v", got.FirstAttempt, got.LastAttempt)
	}
	if got.ErrorSignature != "Timeout::killed after" || got.WorktreeArtifacts == nil || got.WorktreeArtifacts.WorktreePath != "/w2" {
		t.Errorf("newest failure fields not taken: %q %+v", got.ErrorSignature, got.WorktreeArtifacts)
	}
	if string(got.ItemData) != `{"n":1}` && !strings.Contains(string(got.ItemData), `"n": 1`) {
		t.Errorf("item_data lost: %s", got.ItemData)
	}
	onDisk, err := s.Get("item-1")
	if err != nil || !reflect.DeepEqual(*onDisk, got) {
		t.Errorf("stored record differs from returned one: %v", err)
	}
	if ix := readIndexFile(t, s); ix.ItemCount != 1 {
		t.Errorf("index count = %d", ix.ItemCount)
	}
}

func TestEviction(t *testing.T) {
	tests := []struct {
		capacity, adds int
		wantEvicted    []string
	}{
		{capacity: 10, adds: 11, wantEvicted: []string{"id-00"}},
		{capacity: 20, adds: 21, wantEvicted: []string{"id-00", "id-01"}},
		{capacity: 3, adds: 5, wantEvicted: []string{"id-00", "id-01"}},
	}
	for _, tt := range tests {
		t.Run(strconv.Itoa(tt.capacity), func(t *testing.T) {
			var warnings []string
			var evicted []string
			s := openTest(t, t.TempDir(), Options{Capacity: tt.capacity,
				Warn:    func(m string) { warnings = append(warnings, m) },
				OnEvict: func(ids []string) { evicted = append(evicted, ids...) }})
			// Insert in an order unrelated to age: age is the number in the id.
			for i := tt.adds - 1; i >= 0; i-- {
				id := fmt.Sprintf("id-%02d", (i+3)%tt.adds)
				if _, err := s.Add(rec(id, (i+3)%tt.adds)); err != nil {
					t.Fatal(err)
				}
			}
			if !reflect.DeepEqual(evicted, tt.wantEvicted) {
				t.Errorf("evicted %v, want %v", evicted, tt.wantEvicted)
			}
			if len(warnings) == 0 || !strings.Contains(strings.Join(warnings, "\n"), "evicted") {
				t.Errorf("eviction was silent: %v", warnings)
			}
			if n, _ := s.Count(); n > tt.capacity {
				t.Errorf("count %d exceeds capacity %d", n, tt.capacity)
			}
			assertAgree(t, s)
			// Re-adding an existing id at capacity evicts nothing.
			evicted = nil
			if _, err := s.Add(rec(fmt.Sprintf("id-%02d", tt.adds-1), 99)); err != nil {
				t.Fatal(err)
			}
			if len(evicted) != 0 {
				t.Errorf("re-add evicted %v", evicted)
			}
		})
	}
}

func TestPurge(t *testing.T) {
	s := openTest(t, t.TempDir(), Options{})
	now := base.Add(10 * 24 * time.Hour)
	old := rec("old", 0)
	old.LastAttempt = now.Add(-5 * 24 * time.Hour)
	fresh := rec("new", 0)
	fresh.LastAttempt = now
	for _, d := range []DeadLetteredItem{old, fresh} {
		if _, err := s.Add(d); err != nil {
			t.Fatal(err)
		}
	}
	n, err := s.Purge(now.Add(-3 * 24 * time.Hour))
	if err != nil || n != 1 {
		t.Fatalf("Purge = %d, %v; want 1", n, err)
	}
	if ids := assertAgree(t, s); !reflect.DeepEqual(ids, []string{"new"}) {
		t.Errorf("left %v", ids)
	}
}

func TestCorruptFileSkippedWithWarning(t *testing.T) {
	var warnings []string
	s := openTest(t, t.TempDir(), Options{Warn: func(m string) { warnings = append(warnings, m) }})
	for _, id := range []string{"a", "c"} {
		if _, err := s.Add(rec(id, 0)); err != nil {
			t.Fatal(err)
		}
	}
	bad := filepath.Join(s.Dir(), "items", "b.json")
	if err := os.WriteFile(bad, []byte(`{"item_id": "b", "failure_history": [`), 0o644); err != nil {
		t.Fatal(err)
	}
	var seen []string
	if err := s.Each(func(d DeadLetteredItem) error { seen = append(seen, d.ItemID); return nil }); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(seen, []string{"a", "c"}) {
		t.Errorf("visited %v", seen)
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], bad) {
		t.Errorf("warnings %q must name %s", warnings, bad)
	}
	st, err := Stats(s)
	if err != nil || st.TotalItems != 2 {
		t.Errorf("Stats = %+v, %v", st, err)
	}
	if _, err := s.Get("b"); err == nil || errors.Is(err, ErrNotFound) {
		t.Errorf("Get(corrupt) = %v, want a read error", err)
	}
}

func TestCrashRecovery(t *testing.T) {
	t.Run("item_written_index_not", func(t *testing.T) {
		home := t.TempDir()
		s := openTest(t, home, Options{})
		if _, err := s.Add(rec("a", 0)); err != nil {
			t.Fatal(err)
		}
		// A writer died after renaming its item file, before the index.
		data, _ := Encode(rec("b", 1))
		if err := os.WriteFile(s.ItemPath("b"), data, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(s.Dir(), "items", ".tmp-123"), []byte("partial"), 0o644); err != nil {
			t.Fatal(err)
		}
		l, _ := openLock(s.Dir())
		gen, _ := l.state()
		_ = l.set(gen+1, true)
		_ = l.release()
		// The long-lived store notices the dirty flag.
		if n, err := s.Count(); n != 2 || err != nil {
			t.Errorf("Count = %d, %v; want 2", n, err)
		}
		assertAgree(t, s)
		if _, err := os.Stat(filepath.Join(s.Dir(), "items", ".tmp-123")); !os.IsNotExist(err) {
			t.Errorf("stale temporary file kept: %v", err)
		}
	})
	t.Run("index_lists_missing_item", func(t *testing.T) {
		home := t.TempDir()
		s := openTest(t, home, Options{})
		for _, id := range []string{"a", "b"} {
			if _, err := s.Add(rec(id, 0)); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Remove(s.ItemPath("a")); err != nil {
			t.Fatal(err)
		}
		fresh := openTest(t, home, Options{})
		if ix, err := fresh.Index(); err != nil || !reflect.DeepEqual(ix.ItemIDs, []string{"b"}) {
			t.Errorf("Index = %+v, %v", ix, err)
		}
		assertAgree(t, s)
	})
	t.Run("corrupt_index", func(t *testing.T) {
		home := t.TempDir()
		var warnings []string
		s := openTest(t, home, Options{})
		if _, err := s.Add(rec("a", 0)); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(s.Dir(), "index.json"), []byte("{"), 0o644); err != nil {
			t.Fatal(err)
		}
		fresh := openTest(t, home, Options{Warn: func(m string) { warnings = append(warnings, m) }})
		if n, err := fresh.Count(); n != 1 || err != nil {
			t.Errorf("Count = %d, %v", n, err)
		}
		if len(warnings) != 1 || !strings.Contains(warnings[0], "index.json") {
			t.Errorf("warnings = %q", warnings)
		}
		assertAgree(t, s)
	})
	t.Run("journal_not_flushed", func(t *testing.T) {
		home := t.TempDir()
		a := openTest(t, home, Options{FlushDelay: time.Hour})
		b := openTest(t, home, Options{FlushDelay: time.Hour})
		if n, err := b.Count(); n != 0 || err != nil {
			t.Fatalf("b.Count = %d, %v", n, err)
		}
		for _, id := range []string{"x", "y", "z"} {
			if _, err := a.Add(rec(id, 0)); err != nil {
				t.Fatal(err)
			}
		}
		if err := a.Remove("y"); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(a.Dir(), "index.json")); !os.IsNotExist(err) {
			t.Fatalf("index.json written before the flush delay: %v", err)
		}
		// b has loaded the index before; it catches up through the journal.
		if n, err := b.Count(); n != 2 || err != nil {
			t.Errorf("b.Count = %d, %v; want 2", n, err)
		}
		// A process that exits without flushing leaves index + journal;
		// a fresh store reads the truth and writes index.json.
		fresh := openTest(t, home, Options{})
		if ix, err := fresh.Index(); err != nil || !reflect.DeepEqual(ix.ItemIDs, []string{"x", "z"}) {
			t.Errorf("fresh.Index = %+v, %v", ix, err)
		}
		if f := readIndexFile(t, b); !reflect.DeepEqual(f.ItemIDs, []string{"x", "z"}) {
			t.Errorf("index.json = %v", f.ItemIDs)
		}
	})
	t.Run("two_stores_see_each_other", func(t *testing.T) {
		home := t.TempDir()
		a, b := openTest(t, home, Options{}), openTest(t, home, Options{})
		if _, err := a.Add(rec("x", 0)); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Add(rec("y", 0)); err != nil {
			t.Fatal(err)
		}
		if err := a.Remove("y"); err != nil {
			t.Fatal(err)
		}
		if ix, _ := b.Index(); !reflect.DeepEqual(ix.ItemIDs, []string{"x"}) {
			t.Errorf("b sees %v", ix.ItemIDs)
		}
		assertAgree(t, a)
	})
}

func TestClear(t *testing.T) {
	home := t.TempDir()
	mk := func(repo, job string) *Store {
		s, err := Open(jobRoot(home, repo, job), job, Options{Warn: func(m string) { t.Log(m) }})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		if _, err := s.Add(rec("a", 0)); err != nil {
			t.Fatal(err)
		}
		return s
	}
	mk("r2", "job-b")
	s := mk("r1", "job-a")
	mk("r1", "job-c")
	if err := s.Clear(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(home, "dlq", "r1", "job-a")); !os.IsNotExist(err) {
		t.Errorf("job dir still there: %v", err)
	}
	left, _ := filepath.Glob(filepath.Join(home, "dlq", "*", "*"))
	if len(left) != 2 {
		t.Errorf("after Clear the dlq folder holds %v; want the two other jobs only", left)
	}
	// The store keeps working after Clear.
	if _, err := s.Add(rec("b", 0)); err != nil {
		t.Fatal(err)
	}
	if ids := assertAgree(t, s); !reflect.DeepEqual(ids, []string{"b"}) {
		t.Errorf("after re-add: %v", ids)
	}
}

// jobRoot is where jobstore puts a job's DLQ.
func jobRoot(home, repo, jobID string) string { return filepath.Join(home, "dlq", repo, jobID) }

const helperEnv = "DLQ_TEST_HELPER_HOME"

const (
	goroutines   = 64
	addsEach     = 100
	helperUnique = 300
	sharedIDs    = 50
)

// TestHelperProcessAdd is not a test: TestConcurrentAdds runs the test
// binary again with helperEnv set, so a second process adds to the same job.
func TestHelperProcessAdd(t *testing.T) {
	home := os.Getenv(helperEnv)
	if home == "" {
		t.Skip("helper process only")
	}
	s, err := Open(jobRoot(home, "repo", "job-1"), "job-1", Options{Warn: func(m string) { t.Log(m) }})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	}()
	for i := range helperUnique {
		if _, err := s.Add(rec(fmt.Sprintf("proc-%d", i), i%60)); err != nil {
			t.Fatal(err)
		}
		if i < sharedIDs {
			if _, err := s.Add(rec(fmt.Sprintf("shared-%d", i), 1)); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func TestConcurrentAdds(t *testing.T) {
	if testing.Short() {
		t.Skip("thousands of fsynced writes")
	}
	home := t.TempDir()
	helper := exec.Command(os.Args[0], "-test.run=^TestHelperProcessAdd$", "-test.count=1")
	helper.Env = append(os.Environ(), helperEnv+"="+home)
	out := &strings.Builder{}
	helper.Stdout, helper.Stderr = out, out
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	s := openTest(t, home, Options{})
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range addsEach {
				if _, err := s.Add(rec(fmt.Sprintf("g%02d-%03d", g, i), i%60)); err != nil {
					errs <- err
					return
				}
				if g < sharedIDs && i == 0 {
					if _, err := s.Add(rec(fmt.Sprintf("shared-%d", g), 2)); err != nil {
						errs <- err
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if err := helper.Wait(); err != nil {
		t.Fatalf("helper process: %v\n%s", err, out)
	}
	want := goroutines*addsEach + helperUnique + sharedIDs
	ids := assertAgree(t, s)
	if len(ids) != want {
		t.Fatalf("%d records, want %d", len(ids), want)
	}
	fresh := openTest(t, home, Options{})
	if n, err := fresh.Count(); n != want || err != nil {
		t.Errorf("fresh Count = %d, %v", n, err)
	}
	for i := range sharedIDs {
		d, err := s.Get(fmt.Sprintf("shared-%d", i))
		if err != nil || d.FailureCount != 2 || len(d.FailureHistory) != 2 {
			t.Errorf("shared-%d: %v (count %d), want 2 failures from two processes", i, err, d.FailureCount)
		}
	}
}

// Each reads files in parallel chunks but must call fn in file name order
// across chunk boundaries, and stop cleanly on ErrStop.
func TestEachOrderAcrossChunks(t *testing.T) {
	s := openTest(t, t.TempDir(), Options{})
	if err := os.MkdirAll(s.itemsDir, 0o755); err != nil {
		t.Fatal(err)
	}
	n := eachChunk*2 + 37
	for i := range n {
		data, _ := Encode(rec(fmt.Sprintf("item-%04d", i), i))
		if err := os.WriteFile(s.ItemPath(fmt.Sprintf("item-%04d", i)), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	if err := s.Each(func(d DeadLetteredItem) error { got = append(got, d.ItemID); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != n || !sort.StringsAreSorted(got) {
		t.Fatalf("visited %d ids, sorted=%v", len(got), sort.StringsAreSorted(got))
	}
	visits := 0
	err := s.Each(func(DeadLetteredItem) error {
		visits++
		if visits == eachChunk+1 {
			return ErrStop
		}
		return nil
	})
	if err != nil || visits != eachChunk+1 {
		t.Errorf("ErrStop: %d visits, %v", visits, err)
	}
	boom := errors.New("boom")
	if err := s.Each(func(DeadLetteredItem) error { return boom }); !errors.Is(err, boom) {
		t.Errorf("callback error = %v", err)
	}
	if c, err := s.Count(); c != n || err != nil {
		t.Errorf("Count after writing files directly = %d, %v", c, err)
	}
}
