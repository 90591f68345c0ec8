package items

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
)

func TestIDField(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, dir, "in.json", `[{"path":"b.go","n":2},{"path":"a.go","n":1},{"path":"c/d.go","n":3}]`)
	list, err := Load(context.Background(), Options{Input: "in.json", Dir: dir, IDField: "path", SortBy: "n"})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i, it := range list {
		if it.Index != i {
			t.Errorf("item %s has index %d, want %d", it.ID, it.Index, i)
		}
		ids = append(ids, it.ID)
	}
	if got := strings.Join(ids, " "); got != "a.go b.go c/d.go" {
		t.Fatalf("ids = %q, want the path values in sorted order", got)
	}
	// Reordering the input keeps every item's id.
	writeFile(t, dir, "in.json", `[{"path":"c/d.go","n":3},{"path":"b.go","n":2},{"path":"a.go","n":1}]`)
	again, err := Load(context.Background(), Options{Input: "in.json", Dir: dir, IDField: "path"})
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range again {
		var v struct{ Path string }
		_ = json.Unmarshal(it.Data, &v)
		if it.ID != v.Path {
			t.Errorf("item %s carries path %s", it.ID, v.Path)
		}
	}
	// Numbers are ids too, as their JSON text.
	writeFile(t, dir, "num.json", `[{"k":10},{"k":2.5}]`)
	nums, err := Load(context.Background(), Options{Input: "num.json", Dir: dir, IDField: "k"})
	if err != nil || nums[0].ID != "10" || nums[1].ID != "2.5" {
		t.Fatalf("numeric ids = %+v, %v", nums, err)
	}
}

func TestIDFieldErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, input string
		want        []string
	}{
		{"duplicate names both items", `[{"p":"x","n":1},{"p":"y"},{"p":"x","n":3}]`,
			[]string{`items 0 ({"n":1,"p":"x"}) and 2 ({"n":3,"p":"x"}) share the id "x"`}},
		{"empty", `[{"p":"a"},{"p":"  "}]`, []string{`item 1 ({"p":"  "}) has an empty value`}},
		{"missing", `[{"q":1}]`, []string{`item 0 ({"q":1}) has no value for it`}},
		{"object", `[{"p":{"a":1}}]`, []string{"has an object there"}},
		{"newline", `[{"p":"a\nb"}]`, []string{"control character"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			writeFile(t, dir, "in.json", tc.input)
			_, err := Load(context.Background(), Options{Input: "in.json", Dir: dir, IDField: "p"})
			if err == nil {
				t.Fatal("Load accepted bad ids")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) || !strings.Contains(err.Error(), `map.id_field "p"`) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
	if err := Check(Options{IDField: "a..b"}); err == nil || !strings.Contains(err.Error(), "invalid id_field") {
		t.Errorf("Check(bad id_field) = %v", err)
	}
}

func TestLabel(t *testing.T) {
	t.Parallel()
	long := `"` + strings.Repeat("é", 70) + `"`
	tests := map[string]string{
		`"src/main.go"`:         "src/main.go",
		`{"path":"a.go","n":1}`: `{"path":"a.go","n":1}`,
		`"line\nbreak"`:         "line break",
		`42`:                    "42",
		long:                    strings.Repeat("é", 59) + "…",
	}
	for in, want := range tests {
		if got := Label(json.RawMessage(in)); got != want {
			t.Errorf("Label(%s) = %q, want %q", in, got, want)
		}
	}
	if got := ItemLabel("a.go", json.RawMessage(`{"path":"a.go"}`), "path"); got != "a.go" {
		t.Errorf("ItemLabel with id_field = %q", got)
	}
}

func TestFilterNames(t *testing.T) {
	t.Parallel()
	tests := map[string]string{
		`item.priority >= 5 && item.error_signature contains "Timeout"`: "item item.error_signature item.priority",
		`priority >= 5`: "priority",
		`length(item.tags) > 1 AND path matches '\.go$'`: "item item.tags path",
		`item["x"] == null`: "item item.x",
	}
	for src, want := range tests {
		f, err := CompileFilter(src)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(f.Names(), " "); got != want {
			t.Errorf("Names(%s) = %q, want %q", src, got, want)
		}
	}
}
