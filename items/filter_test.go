package items

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"
)

func decode(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("decode %s: %v", s, err)
	}
	return m
}

// itemEnv mirrors how Load builds a filter env: fields on top, plus item.
func itemEnv(m map[string]any) map[string]any {
	env := make(map[string]any, len(m)+1)
	for k, v := range m {
		env[k] = v
	}
	env["item"] = m
	return env
}

func TestFilterMatch(t *testing.T) {
	t.Parallel()
	item := `{"path":"src/main.rs","has_issues":true,"priority":7,"status":"open",
		"tags":["x","y"],"nested":{"level":3,"name":"deep"},"big":12345678901234567890,"nullv":null}`
	tests := []struct {
		name, filter string
		want         bool
	}{
		{"prodigy regex example", `path matches '\.rs$' && has_issues == true`, true},
		{"regex no match", `path matches '\.go$'`, false},
		{"regex double-quoted needs expr escapes", `path matches "\\.rs$"`, true},
		{"regex \\b word boundary raw", `path matches '\bmain\b'`, true},
		{"numeric ge", `priority >= 5`, true},
		{"numeric lt", `priority < 5`, false},
		{"numeric float literal", `priority > 6.5`, true},
		{"or", `status == 'open' || status == 'new'`, true},
		{"item prefix", `item.priority >= 5`, true},
		{"nested", `nested.level == 3 && item.nested.name == 'deep'`, true},
		{"array contains", `tags contains 'x'`, true},
		{"array contains missing", `tags contains 'z'`, false},
		{"string contains", `path contains 'main'`, true},
		{"in list", `status in ['open', 'new']`, true},
		{"not in list", `status in ['closed']`, false},
		{"not in operator", `status not in ['closed']`, true},
		{"not matches operator", `path not matches '\.go$'`, true},
		{"missing field comparison is false", `missing >= 5`, false},
		{"missing field lt is false", `missing < 5`, false},
		{"missing nested member", `nope.deeper.x == 1`, false},
		{"missing item member", `item.nope.x > 1`, false},
		{"missing matches", `missing matches 'x'`, false},
		{"missing contains", `missing contains 'x'`, false},
		{"missing is not equal", `missing == 5`, false},
		{"missing != is true", `missing != 5`, true},
		{"null literal", `nullv == null`, true},
		{"is_null missing", `is_null(missing) && is_not_null(path)`, true},
		{"AND OR NOT words", `NOT (priority < 5) AND (status = 'x' OR has_issues)`, true},
		{"single = equality", `status = 'open'`, true},
		{"starts_with infix", `path starts_with 'src/'`, true},
		{"ends_with infix", `path ends_with '.rs'`, true},
		{"starts_with function", `starts_with(path, 'src') && ends_with(path, 'rs')`, true},
		{"contains function", `contains(path, 'main') && contains(tags, 'y')`, true},
		{"matches function", `matches(path, '^src/.*\.rs$')`, true},
		{"length", `length(tags) == 2 && length(path) == 11`, true},
		{"is_ helpers", `is_number(priority) && is_string(path) && is_bool(has_issues) && is_array(tags) && is_object(nested)`, true},
		{"mixed kinds compare false", `path > 3`, false},
		{"string ordering", `status > 'a'`, true},
		{"big number keeps order", `big > 1e19`, true},
		{"quote escape in single literal", `'it\'s' == "it's"`, true},
		{"bare missing is false", `missing`, false},
		{"not missing is true", `!missing && not item.missing`, true},
		{"not bool field", `!has_issues`, false},
		{"not comparison", `!(priority < 5)`, true},
		{"keyword inside string untouched", `'a AND b' == "a AND b"`, true},
		{"field named like keyword via member", `item.status == 'open'`, true},
	}
	env := itemEnv(decode(t, item))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f, err := CompileFilter(tt.filter)
			if err != nil {
				t.Fatalf("CompileFilter(%q): %v", tt.filter, err)
			}
			got, err := f.Match(env)
			if err != nil {
				t.Fatalf("Match(%q): %v", tt.filter, err)
			}
			if got != tt.want {
				t.Errorf("Match(%q) = %v, want %v", tt.filter, got, tt.want)
			}
		})
	}
}

func TestFilterDLQEnv(t *testing.T) {
	t.Parallel()
	// dlq retry --filter sees {"item": {record fields + item_data fields}}.
	rec := decode(t, `{"item_id":"item_3","failure_count":2,"error_signature":"Timeout::agent timed out",
		"reprocess_eligible":true,"priority":8,"file":"a.go"}`)
	env := map[string]any{"item": rec}
	tests := []struct {
		filter string
		want   bool
	}{
		{`item.priority >= 5`, true},
		{`item.failure_count < 3`, true},
		{`item.failure_count >= 3`, false},
		{`item.error_signature contains "Timeout"`, true},
		{`item.error_signature contains "Merge"`, false},
		{`item.reprocess_eligible && item.file ends_with '.go'`, true},
		{`item.unknown > 1 || item.priority == 8`, true},
	}
	for _, tt := range tests {
		t.Run(tt.filter, func(t *testing.T) {
			t.Parallel()
			f, err := CompileFilter(tt.filter)
			if err != nil {
				t.Fatal(err)
			}
			got, err := f.Match(env)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestCompileFilterErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, filter string
		wantSub      []string
	}{
		{"empty", "  ", []string{"empty"}},
		{"dangling operator", "priority >=", []string{`invalid filter "priority >="`, "column"}},
		{"unbalanced paren", "(a == 1", []string{`invalid filter "(a == 1"`}},
		{"unterminated string", "a == 'x", []string{"invalid filter", "column"}},
		{"column maps to source", `path matches '\.rs$' &&& x`, []string{"column 24"}},
		{"bad constant regex", `path matches '('`, []string{"invalid regular expression"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := CompileFilter(tt.filter)
			if err == nil {
				t.Fatalf("CompileFilter(%q) succeeded", tt.filter)
			}
			for _, s := range tt.wantSub {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not contain %q", err, s)
				}
			}
		})
	}
}

func TestFilterRuntimeErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, filter string
		wantSub      string
	}{
		{"non-bool result", `priority + 1`, "evaluated to a number 8, not a bool"},
		{"string result", `status`, "evaluated to a string"},
		{"bad regex", `matches(status, '(')`, "invalid regular expression"},
		{"negating a string", `!status`, "cannot negate a string"},
	}
	env := itemEnv(decode(t, `{"priority":7,"status":"open"}`))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f, err := CompileFilter(tt.filter)
			if err != nil {
				t.Fatal(err)
			}
			_, err = f.Match(env)
			if err == nil || !strings.Contains(err.Error(), tt.wantSub) {
				t.Fatalf("Match error = %v, want it to contain %q", err, tt.wantSub)
			}
		})
	}
}

func TestFilterConcurrentUse(t *testing.T) {
	t.Parallel()
	f, err := CompileFilter(`matches(path, '\.rs$') && priority > 1`)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			env := map[string]any{"path": "x.rs", "priority": float64(i)}
			got, err := f.Match(env)
			if err != nil || got != (i > 1) {
				t.Errorf("Match(%d) = %v, %v", i, got, err)
			}
		}()
	}
	wg.Wait()
}
