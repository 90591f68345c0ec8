package jobstore_test

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/prodigy-action/prodigy-action/jobstore"
	"github.com/prodigy-action/prodigy-action/redact"
)

// TestAttemptLogIsRedactedAndBounded: a secret split across writes from
// two goroutines never reaches the file; past max bytes the log keeps the
// first and the last half with a line counting what was left out; a
// second attempt of the same number starts the file again.
func TestAttemptLogIsRedactedAndBounded(t *testing.T) {
	p := jobstore.Paths{Home: t.TempDir(), Repo: "repo", JobID: "job-1"}
	const secret = "s3cr3t-token-value-42"
	red := redact.New(redact.Config{Values: []string{secret}})

	w := p.CreateAttemptLog("item/1", 1, red, 1000)
	if w == nil {
		t.Fatal("no log")
	}
	fmt.Fprintf(w, "begin %s", secret[:6])
	fmt.Fprintf(w, "%s end\n", secret[6:])
	var wg sync.WaitGroup
	for g := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 100 {
				fmt.Fprintf(w, "goroutine %d line %03d\n", g, i)
			}
		}()
	}
	wg.Wait()
	fmt.Fprintf(w, "last line\n")
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(p.AttemptLog("item/1", 1))
	if err != nil {
		t.Fatal(err)
	}
	got := string(b)
	switch {
	case strings.Contains(got, secret) || strings.Contains(got, "s3cr3t"):
		t.Errorf("the secret reached the log:\n%s", got)
	case !strings.HasPrefix(got, "begin "):
		t.Errorf("the log does not start with the first write:\n%s", got)
	case !strings.HasSuffix(got, "last line\n"):
		t.Errorf("the log does not end with the last write:\n%s", got)
	case !strings.Contains(got, "of output not kept"):
		t.Errorf("no line says what was left out:\n%s", got)
	case len(got) > 1000+200:
		t.Errorf("the log is %d bytes, bound 1,000 (plus the note)", len(got))
	}

	again := p.CreateAttemptLog("item/1", 1, nil, 1000)
	fmt.Fprintf(again, "rerun\n")
	if err := again.Close(); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p.AttemptLog("item/1", 1)); string(b) != "rerun\n" {
		t.Errorf("a re-run attempt's log = %q, want it started again", b)
	}
}
