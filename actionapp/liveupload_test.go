package actionapp

import (
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/prodigy-action/prodigy-action/ghaction"
)

// liveService records live uploads and deletes; fail makes the next
// upload fail.
type liveService struct {
	mu       sync.Mutex
	uploads  []string
	contents map[string]string // name → result.json uploaded
	deletes  []string
	fail     bool
	uploaded chan string
}

func (s *liveService) UploadFrom(_ context.Context, name string, blob ghaction.Blob, _ int) (ghaction.UploadedArtifact, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail {
		s.fail = false
		return ghaction.UploadedArtifact{}, errors.New("HTTP 503")
	}
	data := make([]byte, blob.Size)
	if _, err := blob.ReadAt(data, 0); err != nil && !errors.Is(err, io.EOF) {
		return ghaction.UploadedArtifact{}, err
	}
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return ghaction.UploadedArtifact{}, err
	}
	rc, err := zr.Open("result.json")
	if err != nil {
		return ghaction.UploadedArtifact{}, err
	}
	b, _ := io.ReadAll(rc)
	rc.Close()
	s.uploads = append(s.uploads, name)
	s.contents[name] = string(b)
	s.uploaded <- name
	return ghaction.UploadedArtifact{Name: name, Size: blob.Size}, nil
}

func (s *liveService) Delete(_ context.Context, name string) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.deletes = append(s.deletes, name)
	return 1, nil
}

// TestLiveUploadsKeepOneNewestSnapshot: the first snapshot goes up as
// soon as an item finished, the next no sooner than the interval after
// it, each deletes the one before once it is up, a failed upload keeps
// the one before and is tried again, and finish uploads what changed
// since — never anything when nothing changed.
func TestLiveUploadsKeepOneNewestSnapshot(t *testing.T) {
	dir := t.TempDir()
	svc := &liveService{contents: map[string]string{}, uploaded: make(chan string, 10)}
	var mu sync.Mutex
	now := time.Date(2026, 11, 25, 0, 0, 0, 0, time.UTC)
	var slept []time.Duration
	logs := make(chan string, 20)
	u := &liveUploads{
		client: svc, dir: dir, tmpDir: t.TempDir(), prefix: "prodigy-shard-J-1-live", shard: 3, interval: time.Minute,
		now: func() time.Time { mu.Lock(); defer mu.Unlock(); return now },
		sleep: func(_ context.Context, d time.Duration) error {
			mu.Lock()
			defer mu.Unlock()
			slept = append(slept, d)
			now = now.Add(d)
			return nil
		},
		lock: new(sync.Mutex), log: func(s string) { logs <- s },
	}
	write := func(result string) {
		u.lock.Lock()
		if err := os.WriteFile(filepath.Join(dir, "result.json"), []byte(result), 0o644); err != nil {
			t.Fatal(err)
		}
		u.lock.Unlock()
		u.written(0)
	}
	wait := func(want string) {
		t.Helper()
		select {
		case got := <-svc.uploaded:
			if got != want {
				t.Fatalf("uploaded %s, want %s", got, want)
			}
		case <-time.After(time.Minute):
			t.Fatalf("no upload of %s", want)
		}
	}
	u.start(context.Background())
	write(`{"output_seq":1}`)
	wait("prodigy-shard-J-1-live1-3")
	mu.Lock()
	now = now.Add(10 * time.Second) // the next item finishes 10 s later
	mu.Unlock()
	write(`{"output_seq":2}`)
	wait("prodigy-shard-J-1-live2-3")
	mu.Lock()
	if len(slept) != 1 || slept[0] != 50*time.Second {
		t.Errorf("slept %v before the second upload, want [50s] (the interval after the first)", slept)
	}
	svc.fail = true
	mu.Unlock()
	write(`{"output_seq":3}`)
	if msg := <-logs; !bytes.Contains([]byte(msg), []byte("uploaded as prodigy-shard-J-1-live1-3")) {
		t.Errorf("log: %s", msg)
	}
	// Drain the two "uploaded" lines, then the failure's.
	for msg := range logs {
		if bytes.Contains([]byte(msg), []byte("not uploaded (the previous upload stays)")) {
			break
		}
	}
	u.finish(context.Background()) // retries the failed snapshot
	wait("prodigy-shard-J-1-live3-3")
	u.finish(context.Background()) // nothing changed: no upload
	svc.mu.Lock()
	defer svc.mu.Unlock()
	if got := len(svc.uploads); got != 3 {
		t.Errorf("uploads %v, want 3", svc.uploads)
	}
	if want := []string{"prodigy-shard-J-1-live1-3", "prodigy-shard-J-1-live2-3"}; len(svc.deletes) != 2 || svc.deletes[0] != want[0] || svc.deletes[1] != want[1] {
		t.Errorf("deletes %v, want %v", svc.deletes, want)
	}
	if c := svc.contents["prodigy-shard-J-1-live3-3"]; c != `{"output_seq":3}` {
		t.Errorf("last snapshot holds %s", c)
	}
}
