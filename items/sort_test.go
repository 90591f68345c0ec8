package items

import (
	"strings"
	"testing"
)

func TestParseSortBy(t *testing.T) {
	t.Parallel()
	tests := []struct {
		src     string
		want    string // field:desc:nullsFirst per clause
		wantErr string
	}{
		{src: "", want: ""},
		{src: "priority", want: "priority:false:false"},
		{src: "priority DESC, name asc", want: "priority:true:false name:false:false"},
		{src: "a.b[1] desc nulls first", want: "a.b[1]:true:true"},
		{src: "x NULLS LAST", want: "x:false:false"},
		{src: "x DOWN", wantErr: `unexpected "DOWN"`},
		{src: "x ASC NULLS", wantErr: "unexpected"},
		{src: "x NULLS MIDDLE", wantErr: "FIRST or LAST"},
		{src: "a,,b", wantErr: "clause 2"},
		{src: "a..b", wantErr: "empty name"},
		{src: "a[x]", wantErr: "not a non-negative integer"},
	}
	for _, tt := range tests {
		t.Run(tt.src, func(t *testing.T) {
			t.Parallel()
			keys, err := parseSortBy(tt.src)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, k := range keys {
				got = append(got, k.field.src+":"+boolStr(k.desc)+":"+boolStr(k.nullsFirst))
			}
			if g := strings.Join(got, " "); g != tt.want {
				t.Errorf("got %q, want %q", g, tt.want)
			}
		})
	}
}

func boolStr(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

func TestSortValues(t *testing.T) {
	t.Parallel()
	mk := func(s string) []any {
		v, err := decodeJSON([]byte(s))
		if err != nil {
			t.Fatal(err)
		}
		return v.([]any)
	}
	tests := []struct {
		name, in, sortBy, want string
	}{
		{"numbers asc", `[{"p":3},{"p":1},{"p":2}]`, "p", `[{"p":1},{"p":2},{"p":3}]`},
		{"desc keeps missing and null last", `[{"p":1},{},{"p":null},{"p":5}]`, "p DESC", `[{"p":5},{"p":1},{},{"p":null}]`},
		{"nulls first", `[{"p":1},{},{"p":5}]`, "p DESC NULLS FIRST", `[{},{"p":5},{"p":1}]`},
		{"stable multi-key", `[{"a":1,"b":"y","i":0},{"a":0,"b":"z","i":1},{"a":1,"b":"x","i":2},{"a":1,"b":"x","i":3}]`,
			"a desc, b", `[{"a":1,"b":"x","i":2},{"a":1,"b":"x","i":3},{"a":1,"b":"y","i":0},{"a":0,"b":"z","i":1}]`},
		{"mixed kinds: numbers before strings", `[{"p":"b"},{"p":10},{"p":true},{"p":2}]`, "p", `[{"p":2},{"p":10},{"p":"b"},{"p":true}]`},
		{"index path", `[{"l":[0,9]},{"l":[0,1]}]`, "l[1]", `[{"l":[0,1]},{"l":[0,9]}]`},
		{"non-object items sort last", `[3,{"p":1}]`, "p", `[{"p":1},3]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			keys, err := parseSortBy(tt.sortBy)
			if err != nil {
				t.Fatal(err)
			}
			vals := mk(tt.in)
			sortValues(vals, keys)
			got, err := compactJSON(vals)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("got %s, want %s", got, tt.want)
			}
		})
	}
}
