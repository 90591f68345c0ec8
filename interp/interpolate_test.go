package interp

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestRender(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   any
		want string
	}{
		{"nil", nil, ""},
		{"string raw", "a \"b\" <c>", "a \"b\" <c>"},
		{"bool", true, "true"},
		{"int", 42, "42"},
		{"int64", int64(-7), "-7"},
		{"float integral", 7.0, "7"},
		{"float", 2.5, "2.5"},
		{"json number keeps digits", json.Number("12345678901234567890123"), "12345678901234567890123"},
		{"map compact sorted no html escape", map[string]any{"b": 1, "a": "<x>"}, `{"a":"<x>","b":1}`},
		{"slice", []any{"a", 1, nil}, `["a",1,null]`},
		{"raw string", json.RawMessage(`"line one"`), "line one"},
		{"raw null", json.RawMessage(`null`), ""},
		{"raw object compacted", json.RawMessage("{ \"a\" : [1, 2] }"), `{"a":[1,2]}`},
		{"struct", struct {
			A int `json:"a"`
		}{3}, `{"a":3}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := Render(tt.in); got != tt.want {
				t.Errorf("Render(%#v) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func testVars() Vars {
	return Vars{
		"item":           json.RawMessage(`{"name":"widget","n":3,"loc":{"file":"a.go","lines":[10,20]},"tags":["x","y"],"none":null,"big":12345678901234567890123}`),
		"item_id":        "item_0",
		"item_index":     0,
		"item_total":     5,
		"attempt":        2,
		"shell.output":   "captured",
		"map.total":      10,
		"map.results":    json.RawMessage(`[{"item_id":"item_0","status":"Success"}]`),
		"PROJECT":        "demo",
		"error":          map[string]any{"message": "boom", "step": "shell: x"},
		"typed":          struct{ Inner struct{ V string } }{Inner: struct{ V string }{V: "deep"}},
		"item_line_like": "plain",
	}
}

func TestInterpolate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in, want string
	}{
		{"whole raw item keeps key order", "${item}", `{"name":"widget","n":3,"loc":{"file":"a.go","lines":[10,20]},"tags":["x","y"],"none":null,"big":12345678901234567890123}`},
		{"field", "fix ${item.name} (${item.n})", "fix widget (3)"},
		{"nested", "${item.loc.file}:${item.loc.lines[1]}", "a.go:20"},
		{"index on field", "${item.tags[0]}${item.tags[1]}", "xy"},
		{"object field compact", "${item.loc}", `{"file":"a.go","lines":[10,20]}`},
		{"null renders empty", "[${item.none}]", "[]"},
		{"big number exact", "${item.big}", "12345678901234567890123"},
		{"ids and counters", "${item_id} ${item_index}/${item_total} try ${attempt}", "item_0 0/5 try 2"},
		{"dotted var names", "${shell.output} ${map.total}", "captured 10"},
		{"map.results raw", "${map.results}", `[{"item_id":"item_0","status":"Success"}]`},
		{"workflow env", "${PROJECT}", "demo"},
		{"go map var", "${error.message}", "boom"},
		{"go struct var", "${typed.Inner.V}", "deep"},
		{"escape", "$${item} and $${HOME}", "${item} and ${HOME}"},
		{"bare dollar left alone", "$HOME $1 $ ${item_id}$", "$HOME $1 $ item_0$"},
		{"default used when unknown", "${item.missing:-none}", "none"},
		{"default used when empty", "${item.none:-dflt}", "dflt"},
		{"default not used", "${item.name:-x}", "widget"},
		{"unicode", "☃ ${item.name} ☃", "☃ widget ☃"},
		{"prefix var not confused", "${item_line_like}", "plain"},
	}
	vars := testVars()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := Interpolate(tt.in, vars)
			if err != nil {
				t.Fatalf("Interpolate(%q): %v", tt.in, err)
			}
			if got != tt.want {
				t.Errorf("Interpolate(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestInterpolateErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in string
		wantSub  []string
	}{
		{"unknown variable", "hi ${nope}", []string{"unknown variable ${nope}", "available: PROJECT, attempt, error"}},
		{"unknown field", "${item.nope}", []string{"unknown variable ${item.nope}", `item has no field "nope"`, "fields: big, loc"}},
		{"path through scalar", "${item.name.x}", []string{"item.name is a string, not an object"}},
		{"index out of range", "${item.tags[5]}", []string{"item.tags has 2 element(s), no index 5"}},
		{"index on object", "${item.loc[0]}", []string{"item.loc is an object, not an array"}},
		{"unknown map var", "${map.successful}", []string{"unknown variable ${map.successful}"}},
		{"unterminated", "line1\n${item.name", []string{"unterminated placeholder", "line 2"}},
		{"invalid syntax", "${#x}", []string{"invalid placeholder ${#x}", "$${"}},
		{"empty", "${}", []string{"invalid placeholder ${}"}},
	}
	vars := testVars()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Interpolate(tt.in, vars)
			if err == nil {
				t.Fatalf("Interpolate(%q) succeeded", tt.in)
			}
			for _, s := range tt.wantSub {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not contain %q", err, s)
				}
			}
		})
	}
}

func TestItemEnv(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		item     any
		wantItem string
	}{
		{"raw message compacted", json.RawMessage("{ \"a\": \"<b>\" }"), `{"a":"<b>"}`},
		{"decoded map", map[string]any{"b": 2.0, "a": "x"}, `{"a":"x","b":2}`},
		{"string item stays JSON", "a line", `"a line"`},
		{"nil", nil, "null"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := ItemEnv(tt.item, "item_3", 3, 10, 2)
			want := []string{"PRODIGY_ITEM=" + tt.wantItem, "PRODIGY_ITEM_ID=item_3", "PRODIGY_ITEM_INDEX=3",
				"PRODIGY_ITEM_TOTAL=10", "PRODIGY_ATTEMPT=2"}
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("ItemEnv = %q, want %q", got, want)
			}
		})
	}
}
