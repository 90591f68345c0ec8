package jobstore

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRemoveJobRemovesTheStateLast: RemoveJob stopped just before the
// state goes (a kill there) leaves the job listed with its checkpoint, so
// removing it again (`jobs discard`) finishes; stopped after the state
// left the jobs folder, the job is no longer listed and the next removal
// deletes what was left.
func TestRemoveJobRemovesTheStateLast(t *testing.T) {
	home := t.TempDir()
	mk := func(id string) Paths {
		p := Paths{Home: home, Repo: "r", JobID: id}
		cp := &Checkpoint{CheckpointHead: CheckpointHead{FormatVersion: CheckpointFormat, JobID: id, Repo: "r", Status: StatusRunning, StartedAt: time.Now(), Vars: map[string]string{}}}
		if err := NewState(p, cp, time.Now).Update(func(*Checkpoint) {}); err != nil {
			t.Fatal(err)
		}
		for _, d := range []string{filepath.Join(p.DLQRoot(), "mapreduce"), filepath.Dir(p.Events())} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		return p
	}
	p := mk("gone")
	stop := errors.New("killed")
	beforeStateRemoval = func(Paths) error { return stop }
	defer func() { beforeStateRemoval = func(Paths) error { return nil } }()
	if err := RemoveJob(p); !errors.Is(err, stop) {
		t.Fatalf("RemoveJob = %v", err)
	}
	if _, err := os.Stat(p.DLQRoot()); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("DLQ still there before the state went: %v", err)
	}
	if found, err := FindJob(home, "", "gone"); err != nil || found != p {
		t.Fatalf("the half-removed job is not listed: %v %v", found, err)
	}
	beforeStateRemoval = func(Paths) error { return nil }
	if err := RemoveJob(p); err != nil {
		t.Fatal(err)
	}
	// A kill after the state left the jobs folder: the next removal (of
	// any job) deletes the rest.
	q := mk("other")
	trash := filepath.Join(home, "state", removingDir, "r-gone")
	if err := os.MkdirAll(trash, 0o755); err != nil {
		t.Fatal(err)
	}
	if jobs, _ := StateJobs(home); len(jobs) != 1 || jobs[0] != q {
		t.Fatalf("jobs listed = %v, want only %v", jobs, q)
	}
	if err := RemoveJob(q); err != nil {
		t.Fatal(err)
	}
	var left []string
	_ = filepath.WalkDir(home, func(path string, d fs.DirEntry, err error) error {
		if strings.Contains(path, "gone") || strings.Contains(path, "other") {
			left = append(left, path)
		}
		return nil
	})
	if len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}
}
