package dlq

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

func nastyIDs() []string {
	return []string{
		"item-123", "item_0", "Item.With.Dots", ".", "..", "../x", "../../etc/passwd", "a/b/c", "/abs",
		"with space", "tab\there", "nul\x00byte", "unicode-é-日本-🚀", "100%", "%2F", "~tilde", "a~b",
		"CON", "trailing.", "back\\slash", ".hidden", strings.Repeat("x", 300), strings.Repeat("é", 150),
		strings.Repeat("/", 300), strings.Repeat("a", 250), strings.Repeat("a", 251),
	}
}

func TestItemFileNameRoundTrip(t *testing.T) {
	seen := map[string]string{}
	for _, id := range nastyIDs() {
		name := ItemFileName(id)
		if len(name) > maxNameBytes {
			t.Errorf("ItemFileName(%.20q) has %d bytes", id, len(name))
		}
		if strings.ContainsAny(name, "/\\\x00") || strings.HasPrefix(name, ".") || !strings.HasSuffix(name, ".json") || !utf8.ValidString(name) {
			t.Errorf("ItemFileName(%.20q) = %q is not a safe plain file name", id, name)
		}
		if prev, dup := seen[name]; dup {
			t.Errorf("ids %.20q and %.20q share file name %q", prev, id, name)
		}
		seen[name] = id
		back, ok := ItemIDFromFileName(name)
		if isHashedName(name) {
			if ok {
				t.Errorf("hashed name %q must not decode", name)
			}
			continue
		}
		if !ok || back != id {
			t.Errorf("ItemIDFromFileName(%q) = %q, %v; want %q", name, back, ok, id)
		}
	}
	if got := ItemFileName("item-123"); got != "item-123.json" {
		t.Errorf("plain ids must keep their name (seed's items/item-123.json), got %q", got)
	}
}

func TestItemIDFromFileNameRejects(t *testing.T) {
	for _, name := range []string{".tmp-123", "a.txt", "%zz.json", "%2.json", "%61.json", "a b.json", "x~0123.json", "%2e.json"} {
		if id, ok := ItemIDFromFileName(name); ok {
			t.Errorf("ItemIDFromFileName(%q) = %q, want rejection", name, id)
		}
	}
}

// Every nasty id stores and reads back inside items/, and nothing is
// written outside the job directory.
func TestStoreNastyIDs(t *testing.T) {
	home := t.TempDir()
	s := openTest(t, home, Options{})
	for _, id := range nastyIDs() {
		if _, err := s.Add(rec(id, 1)); err != nil {
			t.Fatalf("Add(%.20q): %v", id, err)
		}
	}
	for _, id := range nastyIDs() {
		d, err := s.Get(id)
		if err != nil || d.ItemID != id {
			t.Errorf("Get(%.20q) = %v, %v", id, d, err)
		}
	}
	ix, err := s.Index()
	if err != nil || ix.ItemCount != len(nastyIDs()) {
		t.Fatalf("Index = %d items, %v", ix.ItemCount, err)
	}
	// Reconciling from disk alone (fresh store) finds the same ids.
	s2 := openTest(t, home, Options{})
	if err := os.Remove(filepath.Join(s.Dir(), "index.json")); err != nil {
		t.Fatal(err)
	}
	ix2, err := s2.Index()
	if err != nil || ix2.ItemCount != len(nastyIDs()) {
		t.Fatalf("rebuilt Index = %d items, %v", ix2.ItemCount, err)
	}
	err = filepath.WalkDir(home, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(home, p)
		if !d.IsDir() && !strings.HasPrefix(rel, filepath.Join("dlq", "repo", "job-1", "mapreduce", "dlq", "job-1")) {
			t.Errorf("file outside the job dir: %s", rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Add(rec("", 1)); err == nil {
		t.Error("empty id must be rejected")
	}
	if _, err := s.Add(rec("bad\xffutf8", 1)); err == nil {
		t.Error("invalid UTF-8 id must be rejected")
	}
}

func FuzzItemFileName(f *testing.F) {
	for _, id := range nastyIDs() {
		f.Add(id)
	}
	f.Fuzz(func(t *testing.T, id string) {
		name := ItemFileName(id)
		if len(name) > maxNameBytes || strings.ContainsAny(name, "/\\\x00") || strings.HasPrefix(name, ".") {
			t.Fatalf("unsafe name %q for %q", name, id)
		}
		if back, ok := ItemIDFromFileName(name); ok && back != id {
			t.Fatalf("name %q decodes to %q, want %q", name, back, id)
		} else if !ok && !isHashedName(name) {
			t.Fatalf("plain name %q does not decode", name)
		}
	})
}
