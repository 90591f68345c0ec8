package config

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// aliasBomb is a ~400-byte "billion laughs": 9^9 strings if expanded.
func aliasBomb(use string) string {
	var b strings.Builder
	b.WriteString(`a: &a ["x","x","x","x","x","x","x","x","x"]` + "\n")
	prev := "a"
	for _, n := range "bcdefghi" {
		fmt.Fprintf(&b, "%c: &%c [%s]\n", n, n, strings.TrimSuffix(strings.Repeat("*"+prev+",", 9), ","))
		prev = string(n)
	}
	return b.String() + use
}

// allocated returns the bytes allocated while running fn.
func allocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

func TestParseRejectsBombsCheaply(t *testing.T) {
	tests := []struct {
		name, yaml, want string
	}{
		{"alias bomb in on_failure", aliasBomb("map:\n  input: x.json\n  agent_template:\n    - shell: echo\n      on_failure: *i\n"), "aliases expand to more than"},
		{"alias bomb as steps", aliasBomb("map:\n  input: x.json\n  agent_template: *i\n"), ""},
		{"alias bomb in merge keys", "a: &a {k: 1}\nb: &b {<<: [*a,*a,*a,*a,*a,*a,*a,*a,*a]}\nc: &c {<<: [*b,*b,*b,*b,*b,*b,*b,*b,*b]}\nd: &d {<<: [*c,*c,*c,*c,*c,*c,*c,*c,*c]}\ne: &e {<<: [*d,*d,*d,*d,*d,*d,*d,*d,*d]}\nf: &f {<<: [*e,*e,*e,*e,*e,*e,*e,*e,*e]}\ng: &g {<<: [*f,*f,*f,*f,*f,*f,*f,*f,*f]}\nmap:\n  <<: *g\n  input: x\n", "aliases expand to more than"},
		{"deep flow nesting", "a: " + strings.Repeat("[", 200000) + strings.Repeat("]", 200000) + "\n", "flow-collection indicators"},
		{"deep flow mappings", "a: " + strings.Repeat("{a: ", 100000) + "1" + strings.Repeat("}", 100000) + "\n", "flow-collection indicators"},
		{"deep flow nesting under the line limit", "a: " + strings.Repeat("[", 5000) + strings.Repeat("]", 5000) + "\n", "nested more than 100 levels"},
		{"deep flow over many lines", "a: " + strings.Repeat("[\n", 3000) + strings.Repeat("]", 3000) + "\n", "nested more than 100 levels"},
		{"deep block nesting", deepBlock(300), "nested more than 100 levels"},
		{"too large", "name: x\n# " + strings.Repeat("x", MaxFileSize) + "\n", "MiB limit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var err error
			n := allocated(func() { _, err = Parse("w.yml", []byte(tt.yaml)) })
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Parse error = %v, want %q", err, tt.want)
			}
			if limit := uint64(64 << 20); n > limit { // total allocations bound the peak (target: < 100 MB RSS)
				t.Errorf("Parse allocated %d MB, want under %d MB", n>>20, limit>>20)
			}
		})
	}
}

func deepBlock(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "%sk%d:\n", strings.Repeat(" ", i), i)
	}
	return b.String()
}

// largeWorkflow is a valid ~1 MB workflow with many steps and placeholders.
func largeWorkflow() []byte {
	var b strings.Builder
	b.WriteString("name: big\nenv: {A: x}\nmap:\n  input: x.json\n  agent_template:\n")
	for i := 0; b.Len() < 1<<20-200; i++ {
		fmt.Fprintf(&b, "    - shell: |\n        echo %d \"${item.x}\" ${A}\n        test -n \"$PRODIGY_ITEM\"\n      env: {B: \"${item.y}\"}\n", i)
	}
	return []byte(b.String())
}

// TestParseLargeWorkflowAllocations bounds the work of a 1 MB workflow by
// its allocations (not wall time).
func TestParseLargeWorkflowAllocations(t *testing.T) {
	data := largeWorkflow()
	var err error
	n := allocated(func() { _, err = Parse("big.yml", data) })
	if err != nil {
		t.Fatal(err)
	}
	if limit := uint64(400 << 20); n > limit {
		t.Errorf("parsing %d KB allocated %d MB, want under %d MB", len(data)>>10, n>>20, limit>>20)
	}
}

func BenchmarkParseLargeWorkflow(b *testing.B) {
	data := largeWorkflow()
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := Parse("big.yml", data); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseAliasBomb(b *testing.B) {
	data := []byte(aliasBomb("map:\n  input: x.json\n  agent_template:\n    - shell: echo\n      on_failure: *i\n"))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse("bomb.yml", data); err == nil {
			b.Fatal("bomb accepted")
		}
	}
}
