package items

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func writeFile(t *testing.T, dir, name, content string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// dataOf returns the items' Data as strings, checking IDs and indexes.
func dataOf(t *testing.T, items []Item) []string {
	t.Helper()
	out := make([]string, len(items))
	for i, it := range items {
		if it.Index != i || it.ID != "item_"+strconv.Itoa(i) {
			t.Errorf("item %d has ID %q Index %d", i, it.ID, it.Index)
		}
		out[i] = string(it.Data)
	}
	return out
}

func TestLoad(t *testing.T) {
	t.Parallel()
	const tasks = `{"items":[
		{"id":1,"file":"a.rs","priority":3,"team":"x","meta":{"size":10}},
		{"id":2,"file":"b.go","priority":9,"team":"y","meta":{"size":5}},
		{"id":3,"file":"c.rs","priority":5,"team":"x"},
		{"id":4,"file":"d.rs","priority":7,"team":"z","meta":{"size":1}}]}`
	tests := []struct {
		name  string
		files map[string]string
		opts  Options
		want  []string
	}{
		{
			name:  "file array, no json_path",
			files: map[string]string{"in.json": `[{"b":1,"a":"<x>"}, "two", 3, 12345678901234567890123]`},
			opts:  Options{Input: "in.json"},
			want:  []string{`{"a":"<x>","b":1}`, `"two"`, `3`, `12345678901234567890123`},
		},
		{
			name:  "json_path $ makes an object one item",
			files: map[string]string{"in.json": `{"k":"v"}`},
			opts:  Options{Input: "in.json", JSONPath: "$"},
			want:  []string{`{"k":"v"}`},
		},
		{
			name:  "json_path wildcard",
			files: map[string]string{"t.json": tasks},
			opts:  Options{Input: "t.json", JSONPath: "$.items[*].id"},
			want:  []string{`1`, `2`, `3`, `4`},
		},
		{
			name:  "json_path selecting one array uses its elements",
			files: map[string]string{"t.json": tasks},
			opts:  Options{Input: "t.json", JSONPath: "$.items", MaxItems: 1},
			want:  []string{`{"file":"a.rs","id":1,"meta":{"size":10},"priority":3,"team":"x"}`},
		},
		{
			name:  "json_path selecting nothing is zero items",
			files: map[string]string{"t.json": tasks},
			opts:  Options{Input: "t.json", JSONPath: "$.nothing[*]"},
			want:  []string{},
		},
		{
			name:  "json_path filter selector",
			files: map[string]string{"t.json": tasks},
			opts:  Options{Input: "t.json", JSONPath: "$.items[?@.priority > 4].id"},
			want:  []string{`2`, `3`, `4`},
		},
		{
			name:  "filter, sort desc, limit",
			files: map[string]string{"t.json": tasks},
			opts: Options{Input: "t.json", JSONPath: "$.items[*]", Filter: `file matches '\.rs$' && priority >= 5`,
				SortBy: "priority DESC"},
			want: []string{
				`{"file":"d.rs","id":4,"meta":{"size":1},"priority":7,"team":"z"}`,
				`{"file":"c.rs","id":3,"priority":5,"team":"x"}`,
			},
		},
		{
			name:  "nested sort with missing last, then distinct, offset, limit",
			files: map[string]string{"t.json": tasks},
			opts:  Options{Input: "t.json", JSONPath: "$.items[*].meta.size"},
			want:  []string{`10`, `5`, `1`},
		},
		{
			name:  "sort by nested asc, missing last",
			files: map[string]string{"t.json": tasks},
			opts:  Options{Input: "t.json", JSONPath: "$.items[*]", SortBy: "meta.size", Filter: "true"},
			want: []string{
				`{"file":"d.rs","id":4,"meta":{"size":1},"priority":7,"team":"z"}`,
				`{"file":"b.go","id":2,"meta":{"size":5},"priority":9,"team":"y"}`,
				`{"file":"a.rs","id":1,"meta":{"size":10},"priority":3,"team":"x"}`,
				`{"file":"c.rs","id":3,"priority":5,"team":"x"}`,
			},
		},
		{
			name:  "distinct keeps first per value after sort",
			files: map[string]string{"t.json": tasks},
			opts:  Options{Input: "t.json", JSONPath: "$.items[*]", SortBy: "priority ASC", Distinct: "team"},
			want: []string{
				`{"file":"a.rs","id":1,"meta":{"size":10},"priority":3,"team":"x"}`,
				`{"file":"d.rs","id":4,"meta":{"size":1},"priority":7,"team":"z"}`,
				`{"file":"b.go","id":2,"meta":{"size":5},"priority":9,"team":"y"}`,
			},
		},
		{
			name:  "offset and max_items",
			files: map[string]string{"t.json": tasks},
			opts:  Options{Input: "t.json", JSONPath: "$.items[*].id", Offset: 1, MaxItems: 2},
			want:  []string{`2`, `3`},
		},
		{
			name:  "offset past the end",
			files: map[string]string{"t.json": tasks},
			opts:  Options{Input: "t.json", JSONPath: "$.items[*].id", Offset: 10},
			want:  []string{},
		},
		{
			name:  "input path expands env",
			files: map[string]string{"in.json": `[1]`},
			opts:  Options{Input: "${SUB}/in.json", Env: []string{"SUB=."}},
			want:  []string{`1`},
		},
		{
			name: "command printing a JSON array",
			opts: Options{Input: `echo '[{"n":1},{"n":2}]'`, Filter: "n > 1"},
			want: []string{`{"n":2}`},
		},
		{
			name: "command printing JSON lines",
			opts: Options{Input: `printf '{"n":1}\n\n{"n":2}\n'`, SortBy: "n DESC"},
			want: []string{`{"n":2}`, `{"n":1}`},
		},
		{
			name: "command printing plain lines keeps strings",
			opts: Options{Input: `printf 'src/a.rs\nsrc/b file.go\n42\n'`, Filter: `item matches '\.rs$' || item == 42`},
			want: []string{`"src/a.rs"`, `42`},
		},
		{
			name: "command printing nothing is zero items",
			opts: Options{Input: `true`},
			want: []string{},
		},
		{
			name: "command runs in Dir with Env",
			opts: Options{Input: `printf '["%s","%s"]' "$(basename "$PWD")" "$FOO"`, Env: []string{"FOO=bar"}},
			want: []string{`"DIR"`, `"bar"`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			for name, content := range tt.files {
				writeFile(t, dir, name, content)
			}
			tt.opts.Dir = dir
			got, err := Load(context.Background(), tt.opts)
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			want := make([]string, len(tt.want))
			for i, w := range tt.want {
				want[i] = strings.ReplaceAll(w, "DIR", filepath.Base(dir))
			}
			if g := dataOf(t, got); strings.Join(g, "\n") != strings.Join(want, "\n") {
				t.Errorf("items:\n got %q\nwant %q", g, want)
			}
		})
	}
}

func TestLoadErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		files   map[string]string
		opts    Options
		wantSub []string
	}{
		{"empty input", nil, Options{Input: " "}, []string{"input is empty"}},
		{"missing json file", nil, Options{Input: "work-items.json"}, []string{"input file", "work-items.json", "does not exist"}},
		{"failing command", nil, Options{Input: "echo boom >&2; exit 3"},
			[]string{`input command "echo boom >&2; exit 3" failed with exit code 3`, "stderr: boom"}},
		{"unknown command", nil, Options{Input: "no-such-tool-xyz --list"}, []string{"exit code 127", "command not found"}},
		{"invalid json file", map[string]string{"in.json": "[1,\n 2,,]"}, Options{Input: "in.json"},
			[]string{"is not valid JSON", "line 2"}},
		{"trailing data in file", map[string]string{"in.json": `[1] [2]`}, Options{Input: "in.json"},
			[]string{"unexpected data after the first JSON value"}},
		{"object without json_path", map[string]string{"in.json": `{"k":"v"}`}, Options{Input: "in.json"},
			[]string{"input is a JSON object, not an array of items", "json_path"}},
		{"empty file", map[string]string{"in.json": ``}, Options{Input: "in.json"}, []string{"is not valid JSON: it is empty"}},
		{"directory", map[string]string{"d.json/x": "1"}, Options{Input: "d.json"}, []string{"is a directory"}},
		{"bad json_path", map[string]string{"in.json": `[]`}, Options{Input: "in.json", JSONPath: "$.items["},
			[]string{`invalid json_path "$.items["`, "position 9"}},
		{"json_path without $", map[string]string{"in.json": `[]`}, Options{Input: "in.json", JSONPath: "items[*]"},
			[]string{"starts with $"}},
		{"bad filter", map[string]string{"in.json": `[]`}, Options{Input: "in.json", Filter: "priority >="},
			[]string{`invalid filter "priority >="`}},
		{"non-bool filter", map[string]string{"in.json": `[{"p":1}]`}, Options{Input: "in.json", Filter: "p + 1"},
			[]string{"item 0 of the selection", "not a bool"}},
		{"bad sort_by", map[string]string{"in.json": `[]`}, Options{Input: "in.json", SortBy: "priority DOWN"},
			[]string{`invalid sort_by "priority DOWN"`, `unexpected "DOWN"`}},
		{"bad option does not run command", nil, Options{Input: "touch ran", Filter: "(("},
			[]string{"invalid filter"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			for name, content := range tt.files {
				if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
					t.Fatal(err)
				}
				writeFile(t, dir, name, content)
			}
			tt.opts.Dir = dir
			_, err := Load(context.Background(), tt.opts)
			if err == nil {
				t.Fatal("Load succeeded")
			}
			for _, s := range tt.wantSub {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not contain %q", err, s)
				}
			}
			if _, statErr := os.Stat(filepath.Join(dir, "ran")); statErr == nil {
				t.Error("input command ran although an option was invalid")
			}
		})
	}
}

func TestLoadCommandErrorType(t *testing.T) {
	t.Parallel()
	_, err := Load(context.Background(), Options{Input: "exit 4", Dir: t.TempDir()})
	var ce *CommandError
	if !errors.As(err, &ce) || ce.ExitCode != 4 || ce.TimedOut {
		t.Fatalf("err = %#v, want *CommandError with exit code 4", err)
	}
}

func TestLoadTimeout(t *testing.T) {
	t.Parallel()
	_, err := Load(context.Background(), Options{Input: "sleep 300", Dir: t.TempDir(), Timeout: 50 * time.Millisecond})
	var ce *CommandError
	if !errors.As(err, &ce) || !ce.TimedOut {
		t.Fatalf("err = %v, want a timeout *CommandError", err)
	}
	if !strings.Contains(err.Error(), "timed out after 50ms") {
		t.Errorf("error %q does not say it timed out", err)
	}
}

func TestLoadCancelKillsProcessGroup(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fifo := filepath.Join(dir, "ready")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		// Cancel once the command has started its background grandchild.
		if f, err := os.Open(fifo); err == nil {
			_, _ = f.Read(make([]byte, 1))
			f.Close()
		}
		cancel()
	}()
	cmd := `sleep 300 & echo $! > child.pid; echo x > ready; wait`
	_, err := Load(ctx, Options{Input: cmd, Dir: dir})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "child.pid"))
	if err != nil {
		t.Fatalf("grandchild pid not written: %v", err)
	}
	pid := strings.TrimSpace(string(raw))
	// SIGKILL is delivered asynchronously; poll (bounded) until the
	// grandchild is gone or a zombie awaiting its reaper.
	deadline := time.Now().Add(10 * time.Second)
	for {
		stat, err := os.ReadFile("/proc/" + pid + "/stat")
		if err != nil || strings.Contains(string(stat), ") Z ") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("grandchild %s still running after cancellation: %s", pid, stat)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestLoadContextCancelled(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := Load(ctx, Options{Input: "echo '[1]'", Dir: t.TempDir()})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

func TestCheck(t *testing.T) {
	t.Parallel()
	if err := Check(Options{JSONPath: "$.items[*]", Filter: "a > 1", SortBy: "a DESC NULLS FIRST, b.c asc", Distinct: "id"}); err != nil {
		t.Fatalf("Check valid options: %v", err)
	}
	err := Check(Options{JSONPath: "$[", Filter: "a >", SortBy: ",", Distinct: "a..b", Offset: -1, MaxItems: -2})
	if err == nil {
		t.Fatal("Check accepted invalid options")
	}
	for _, s := range []string{"invalid json_path", "invalid filter", "invalid sort_by", "invalid distinct", "invalid offset", "invalid max_items"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not mention %q", err, s)
		}
	}
}
