package validate

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prodigy-action/prodigy-action/config"
)

func TestCheckoutWarnsOfWhatAgentsDoNotSee(t *testing.T) {
	top := t.TempDir()
	wfPath := filepath.Join(top, "flows", "w.yml")
	if err := os.MkdirAll(filepath.Dir(wfPath), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(wfPath, []byte("name: w\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	wf := &config.Workflow{Path: wfPath}
	wf.Map.Input = "items.json"

	if w := Checkout(wf, top, ""); w != nil {
		t.Fatalf("clean checkout: %q", w)
	}
	// The workflow file alone changes nothing agents see.
	if w := Checkout(wf, top, "Untracked: flows/w.yml"); w != nil {
		t.Fatalf("only the workflow changed: %q", w)
	}
	w := Checkout(wf, top, "Modified: items.json\nUntracked: flows/w.yml\nUntracked: notes.txt")
	if len(w) != 2 || !strings.Contains(w[0], "map.input items.json differs from HEAD (modified)") ||
		!strings.Contains(w[1], "2 uncommitted change(s)") || strings.Contains(w[1], "w.yml") {
		t.Fatalf("warnings = %q", w)
	}
	if w := Checkout(wf, top, "Untracked: items.json"); !strings.Contains(w[0], "is not committed") {
		t.Fatalf("untracked input: %q", w)
	}
	if w := Checkout(wf, top, "Renamed: old.json -> items.json"); len(w) != 2 || !strings.Contains(w[0], "(renamed)") {
		t.Fatalf("renamed onto the input: %q", w)
	}
	// A command is not a file: no input warning.
	wf.Map.Input = "jq -c . items.json"
	if w := Checkout(wf, top, "Modified: items.json"); len(w) != 1 {
		t.Fatalf("command input: %q", w)
	}
	// An absolute input inside the repository is named relative to it.
	wf.Map.Input = filepath.Join(top, "data", "in.json")
	if w := Checkout(wf, top, "Modified: data/in.json"); len(w) != 2 || !strings.Contains(w[0], "map.input data/in.json") {
		t.Fatalf("absolute input: %q", w)
	}
	// At most five changes are listed.
	var many []string
	for i := range 8 {
		many = append(many, fmt.Sprintf("Untracked: f%d", i))
	}
	if w := Checkout(wf, top, strings.Join(many, "\n")); !strings.Contains(w[0], "8 uncommitted change(s)") || !strings.Contains(w[0], "… and 3 more") {
		t.Fatalf("many changes: %q", w)
	}
}
