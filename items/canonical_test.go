package items

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// stdCompact is compactJSON's encoding/json path, the oracle.
func stdCompact(t testing.TB, v any) (string, bool) {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "", false
	}
	return strings.TrimSuffix(b.String(), "\n"), true
}

// decodeNumbers decodes JSON as item loading does (UseNumber).
func decodeNumbers(s string) (any, error) {
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var v any
	err := dec.Decode(&v)
	return v, err
}

// checkCompact: appendCompact gives encoding/json's bytes for v, or
// declines.
func checkCompact(t testing.TB, v any) {
	t.Helper()
	got, ok := appendCompact(nil, v)
	want, wantOK := stdCompact(t, v)
	if ok && (!wantOK || string(got) != want) {
		t.Fatalf("appendCompact(%#v) = %q, encoding/json = %q (ok %v)", v, got, want, wantOK)
	}
	c, err := compactJSON(v)
	if (err == nil) != wantOK || (err == nil && string(c) != want) {
		t.Fatalf("compactJSON(%#v) = %q, %v; encoding/json = %q (ok %v)", v, c, err, want, wantOK)
	}
}

var compactSeeds = []string{
	`null`, `true`, `false`, `0`, `-0`, `1.5e-7`, `12345678901234567890123`, `-1E+2`,
	`"plain"`, `""`, `"quote \" backslash \\ slash \/"`, `"<script>&amp;</script>"`,
	`"\u0000\u0001\u0007\b\f\n\r\t\u001f\u007f"`, `"\u2028 and \u2029"`, `"é ü 中文 🎉"`,
	`"\ud800 lone surrogate"`, `[]`, `{}`, `[1,"a",null,[{}]]`,
	`{"b":1,"a":{"d":[true,false],"c":"x"},"A":null,"":0,"é":1,"a\u0000":2}`,
	`{"id":"item-0000001","path":"src/file1.go","priority":1,"slot":0}`,
}

func TestAppendCompactIsEncodingJSON(t *testing.T) {
	for _, s := range compactSeeds {
		v, err := decodeNumbers(s)
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		checkCompact(t, v)
	}
	// Strings as Go holds them, invalid UTF-8 included, and values a
	// decoder does not give (declined, or encoded by encoding/json).
	for _, v := range []any{
		"bad \xff\xfe utf-8 \xe2\x80", "\xed\xa0\x80", string([]byte{0xe2, 0x80, 0xa8}),
		json.Number(""), json.Number("01"), json.Number("1."), json.Number("abc"), json.Number("-"),
		[]any(nil), map[string]any(nil), 1.5, float64(3), []any{1, "x"}, map[string]any{"k": int64(7)},
		map[string]any{"k": []any{json.Number("2"), map[string]any{"z": "\u2029", "y": nil}}},
	} {
		checkCompact(t, v)
	}
}

func FuzzAppendCompact(f *testing.F) {
	for _, s := range compactSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if v, err := decodeNumbers(s); err == nil {
			checkCompact(t, v)
		}
		checkCompact(t, s) // s itself as a string value
		checkCompact(t, map[string]any{s: []any{s, json.Number(s)}})
	})
}

func BenchmarkCompactJSON(b *testing.B) {
	v, err := decodeNumbers(`{"id":"item-0000001","path":"src/file1.go","priority":1,"slot":0,"tags":["a","b"],"note":"x < y & \"z\""}`)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("appendCompact", func(b *testing.B) {
		for b.Loop() {
			_, _ = appendCompact(nil, v)
		}
	})
	b.Run("encoding/json", func(b *testing.B) {
		for b.Loop() {
			_, _ = stdCompact(b, v)
		}
	})
}
