package dlq

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prodigy-action/prodigy-action/redact"
)

// TestStoreRedactsWrites: Options.Redact sees every item file and
// index.json before it is written, and Add returns the stored (redacted)
// record.
func TestStoreRedactsWrites(t *testing.T) {
	home := t.TempDir()
	const token = "ghp_" + "0123456789abcdefghijklmnopqrstuvwxyz"
	const value = "quote\"and\nnewline-secret"
	red := redact.New(redact.Config{Values: []string{value}})
	s := openTest(t, home, Options{Redact: red.JSON, FlushDelay: -1})
	r := rec("item-1", 1)
	r.FailureHistory[0].ErrorMessage = "push failed: token " + token + " value " + value
	r.ItemData = json.RawMessage(`{"env":"` + token + `"}`)
	stored, err := s.Add(r)
	if err != nil {
		t.Fatal(err)
	}
	if got := stored.FailureHistory[0].ErrorMessage; got != "push failed: token *** value ***" {
		t.Errorf("stored message = %q", got)
	}
	err = filepath.WalkDir(home, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		enc, _ := json.Marshal(value)
		for _, leak := range []string{token, value, string(enc[1 : len(enc)-1]), "newline-secret"} {
			if strings.Contains(string(b), leak) {
				t.Errorf("%s holds %q:\n%s", p, leak, b)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Get("item-1")
	if err != nil {
		t.Fatal(err)
	}
	var data bytes.Buffer
	if err := json.Compact(&data, got.ItemData); err != nil || got.ItemID != "item-1" || data.String() != `{"env":"***"}` {
		t.Errorf("Get = %s %s, %v", got.ItemID, got.ItemData, err)
	}
}
