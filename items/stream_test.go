package items

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// TestEachMatchesLoad: streamed or not, Each yields exactly Load's items
// and errors.
func TestEachMatchesLoad(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return name
	}
	arr := write("a.json", ` [ {"id": "x", "b": 2, "a": [1, 2.50]}, {"id": 7, "z": "<&>"}, "plain", 3, {"id": "y", "n": null} ] `)
	dup := write("dup.json", `[{"id": "x"}, {"id": "x"}]`)
	bad := write("bad.json", `[{"id": "x"}, {"id": ]`)
	trailing := write("trail.json", `[{"id": "x"}] []`)
	obj := write("obj.json", `{"items": [{"id": "q"}, {"id": "r"}]}`)
	cases := []Options{
		{Input: arr},
		{Input: arr, Offset: 1, MaxItems: 2},
		{Input: arr, Offset: 9},
		{Input: arr, IDField: "id", MaxItems: 2},
		{Input: arr, IDField: "id"}, // "plain" has no id: an error
		{Input: dup, IDField: "id"},
		{Input: bad},
		{Input: trailing},
		{Input: obj, JSONPath: "$.items[*]", IDField: "id"},
		{Input: arr, Filter: "b == 2"},
		{Input: "echo '[{\"id\": 1}, {\"id\": 2}]'"},
	}
	for _, o := range cases {
		o.Dir = dir
		want, werr := Load(context.Background(), o)
		var got []Item
		n, gerr := Each(context.Background(), o, func(it Item) error { got = append(got, it); return nil })
		if (werr == nil) != (gerr == nil) || (werr != nil && werr.Error() != gerr.Error()) {
			t.Errorf("%+v: Each error %v, Load error %v", o, gerr, werr)
			continue
		}
		if werr != nil {
			continue
		}
		if n != len(want) || len(got) != len(want) || (len(want) > 0 && !reflect.DeepEqual(got, want)) {
			t.Errorf("%+v: Each = %d %+v\nLoad = %+v", o, n, got, want)
		}
	}
}
