package report

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./report -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from the golden file:\n--- got ---\n%s\n--- want ---\n%s", name, got, want)
	}
}

func sampleInput() Input {
	return Input{
		Title:         "Fix lints <script>",
		JobID:         "mapreduce-20260301T120000Z-ab12",
		Status:        "completed",
		Command:       "run",
		Total:         10,
		Successful:    6,
		Failed:        3,
		Skipped:       1,
		DLQCount:      3,
		ResultsBranch: "prodigy/mapreduce-20260301T120000Z-ab12",
		Pushed:        true,
		FailedItems: []FailedItem{
			{ItemID: "src/main.rs", ErrorType: "CommandFailed", Signature: "CommandFailed::cargo test failed with exit code", Attempts: 3,
				LastError: "cargo test failed with exit code 101\nthread 'main' panicked", LogLocation: "/github/home/.prodigy/logs/r/j/src_main.rs/attempt-3.jsonl", ReprocessEligible: true},
			{ItemID: "evil | @octocat <img src=x onerror=alert(1)>", ErrorType: "Timeout", Signature: "Timeout::agent timed out after s", Attempts: 1,
				LastError: "see [click](https://evil.example) ![x](https://t.example/p.png) `code` #123 org/repo#4", ReprocessEligible: true},
			{ItemID: "lib/util.go", ErrorType: "MergeConflict", Signature: "MergeConflict::merge conflict in", Attempts: 2,
				LastError: "merge conflict in lib/util.go", ReprocessEligible: false},
		},
		Patterns: []PatternGroup{
			{Signature: "CommandFailed::cargo test failed with exit code", ErrorType: "CommandFailed", Count: 1, Items: []string{"src/main.rs"}},
			{Signature: "Timeout::agent timed out after s", ErrorType: "Timeout", Count: 1, Items: []string{"evil | @octocat"}},
			{Signature: "MergeConflict::merge conflict in", ErrorType: "MergeConflict", Count: 1, Items: []string{"lib/util.go"}},
		},
		Orphaned: []OrphanedWorktree{{Path: "/github/runner_temp/prodigy/worktrees/r/j/agent-2", Branch: "prodigy-agent-2", ItemID: "a.go", Error: "remove worktree: device busy"}},
		Artifact: &Artifact{Name: "prodigy-dlq-123456-1", ID: 987, URL: "https://github.com/o/r/actions/runs/123456/artifacts/987",
			ExpiresAt: time.Date(2026, 3, 31, 12, 0, 0, 0, time.UTC)},
		Redrive: &Redrive{Workflow: "redrive.yml", Ref: "feature/x", Repo: "o/r", RunID: 123456},
		RunURL:  "https://github.com/o/r/actions/runs/123456",
		Notices: []string{"Could not comment on PR #7: fork pull requests get a read-only token."},
	}
}

func TestGolden(t *testing.T) {
	t.Parallel()
	clean := Input{Title: "Docs", JobID: "j1", Status: "completed", Total: 2, Successful: 2, ResultsBranch: "prodigy/j1"}
	failed := Input{Title: "Docs", JobID: "j2", Status: "failed", Command: "retry", Error: "setup failed: exit status 1", Total: 4, Pending: 4}
	tests := []struct {
		name string
		in   Input
	}{{"full", sampleInput()}, {"clean", clean}, {"failed", failed}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			golden(t, tt.name+".summary.md", Summary(tt.in))
			golden(t, tt.name+".comment.md", Comment(tt.in))
		})
	}
}

func TestNoInjection(t *testing.T) {
	t.Parallel()
	in := sampleInput()
	for name, out := range map[string]string{"summary": Summary(in), "comment": Comment(in)} {
		for _, bad := range []string{"<img", "<script", "@octocat", "](https://evil", "![x]", "`code`", " #123", "repo#4"} {
			if strings.Contains(out, bad) {
				t.Errorf("%s contains %q", name, bad)
			}
		}
		// Every table row keeps its column count despite | in item text.
		for _, line := range strings.Split(out, "\n") {
			if strings.HasPrefix(line, "| evil") || strings.Contains(line, "evil &#124;") {
				if got := strings.Count(line, " | "); got < 3 {
					t.Errorf("%s: row split wrongly: %q", name, line)
				}
				if strings.Contains(line, "evil |") {
					t.Errorf("%s: raw pipe in cell: %q", name, line)
				}
			}
		}
	}
}

var moreRE = regexp.MustCompile(`…and (\d+) more`)

func manyItems(n, errLen int) Input {
	in := Input{Title: "big", JobID: "j", Status: "completed", Total: n, Failed: n, DLQCount: n,
		Redrive: &Redrive{Workflow: "redrive.yml", RunID: 42}}
	for i := range n {
		in.FailedItems = append(in.FailedItems, FailedItem{ItemID: fmt.Sprintf("item-%06d", i), ErrorType: "CommandFailed",
			Signature: "CommandFailed::" + strings.Repeat("s", 150), Attempts: 3, LastError: strings.Repeat("e", errLen),
			LogLocation: "/logs/" + strings.Repeat("l", 150), ReprocessEligible: true})
	}
	return in
}

func shownRows(out string) int { return strings.Count(out, "| item-") }

func TestTruncation(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		render   func(Input) string
		in       Input
		limit    int
		wantRows int // -1: just "fewer than all"
	}{
		{"summary fits", Summary, manyItems(100, 300), MaxSummaryBytes, 100},
		{"summary over 1 MiB", Summary, manyItems(2000, 300), MaxSummaryBytes, -1},
		{"comment caps at 20 rows", Comment, manyItems(30, 50), MaxCommentChars, 20},
		{"comment over limit", Comment, manyItems(20, 5000), MaxCommentChars, 20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			out := tt.render(tt.in)
			if len(out) > tt.limit {
				t.Fatalf("output is %d bytes, limit %d", len(out), tt.limit)
			}
			rows := shownRows(out)
			if tt.wantRows >= 0 && rows != tt.wantRows {
				t.Errorf("rows = %d, want %d", rows, tt.wantRows)
			}
			if tt.wantRows < 0 && rows >= len(tt.in.FailedItems) {
				t.Fatalf("all %d rows shown; the case must exceed the limit", rows)
			}
			total := len(tt.in.FailedItems)
			m := moreRE.FindStringSubmatch(out)
			if rows == total {
				if m != nil {
					t.Errorf("unexpected %q", m[0])
				}
				return
			}
			if m == nil {
				t.Fatalf("%d of %d rows shown without an \"…and N more\" line", rows, total)
			}
			if n, _ := strconv.Atoi(m[1]); rows+n != total {
				t.Errorf("shown %d + more %d != %d", rows, n, total)
			}
			if !strings.Contains(out, "retry-from-run=42") {
				t.Error("redrive line lost in truncation")
			}
			if tt.limit == MaxSummaryBytes && len(out) < tt.limit*9/10 {
				t.Errorf("summary truncated too eagerly: %d bytes", len(out))
			}
		})
	}
}

func TestEscape(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"plain text 123", "plain text 123"},
		{"a<b>&c", "a&lt;b&gt;&amp;c"},
		{"@here ping", "@\u200bhere ping"},
		{"fix #12", "fix #\u200b12"},
		{"x|y", "x&#124;y"},
		{"`rm -rf`", "&#96;rm -rf&#96;"},
		{"[a](b) ![i](u) *b* _i_ ~s~", `\[a\]\(b\) \!\[i\]\(u\) \*b\* \_i\_ \~s\~`},
		{"line1\n\n\tline2\r\x00end", "line1 line2 end"},
		{`back\slash $x$ :smile:`, `back\\slash \$x\$ \:smile\:`},
	}
	for _, tt := range tests {
		if got := Escape(tt.in); got != tt.want {
			t.Errorf("Escape(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestTruncateAndCell(t *testing.T) {
	t.Parallel()
	tests := []struct {
		s    string
		max  int
		want string
	}{{"hello", 10, "hello"}, {"hello", 5, "hello"}, {"hello", 4, "hel…"}, {"héllo wörld", 3, "hé…"}, {"abc", 1, "…"}, {"abc", 0, "abc"}}
	for _, tt := range tests {
		if got := Truncate(tt.s, tt.max); got != tt.want {
			t.Errorf("Truncate(%q, %d) = %q, want %q", tt.s, tt.max, got, tt.want)
		}
	}
	if got := Cell("  a\n b <c>  ", 100); got != "a b &lt;c&gt;" {
		t.Errorf("Cell = %q", got)
	}
	if got := Cell(" \n ", 10); got != "—" {
		t.Errorf("empty Cell = %q", got)
	}
	if got := Cell("<<<<<<", 3); got != "&lt;&lt;…" {
		t.Errorf("Cell truncates before escaping: got %q", got)
	}
}

func TestRedriveCommandQuoting(t *testing.T) {
	t.Parallel()
	in := Input{Status: "completed", DLQCount: 1, Redrive: &Redrive{Workflow: "re drive.yml", Ref: "it's`x", RunID: 7, Force: true}}
	out := Summary(in)
	want := "gh workflow run 're drive.yml' --ref 'it'\\''sx' -f retry-from-run=7 -f retry-force=true"
	if !strings.Contains(out, want) {
		t.Errorf("summary lacks %q:\n%s", want, out)
	}
	in.DLQCount = 0
	if strings.Contains(Summary(in), "gh workflow run") {
		t.Error("redrive shown with an empty DLQ")
	}
}

// hostileFormat hides text with bidi overrides/isolates and zero-width
// characters (the "Trojan Source" tricks).
const hostileFormat = "ok\u202e)gnp.exe\u202c \u2066x\u2069 a\u200bb\u200cc\u200dd\u200ee\u200ff\u2060g\ufeffh \u202a\u202b\u202d"

func TestEscapeNeutralisesFormatCharacters(t *testing.T) {
	t.Parallel()
	got := Escape(hostileFormat)
	for _, r := range got {
		// Escape's own zero-width space after @ and # is the only one allowed.
		if IsFormatChar(r) {
			t.Fatalf("Escape left %U in %q", r, got)
		}
	}
	if !strings.Contains(got, "⟨U+202E⟩") || !strings.Contains(got, "⟨U+FEFF⟩") {
		t.Errorf("format characters not shown: %q", got)
	}
	if c := code("job\u202eid"); strings.ContainsRune(c, '\u202e') {
		t.Errorf("code() kept U+202E: %q", c)
	}
	if w := shellWord("item.x == 'a\u2066b'"); strings.ContainsRune(w, '\u2066') {
		t.Errorf("shellWord kept U+2066: %q", w)
	}
}

// TestRenderedFormatCharactersWithCmarkGFM renders a summary holding hostile
// text with GitHub's markdown engine (cmark-gfm) and checks the HTML has no
// format character except the zero-width spaces Escape adds after @ and #.
func TestRenderedFormatCharactersWithCmarkGFM(t *testing.T) {
	t.Parallel()
	cmark, err := exec.LookPath("cmark-gfm")
	if err != nil {
		t.Skip("cmark-gfm not installed (apt-get install cmark-gfm)")
	}
	in := Input{Title: "t" + hostileFormat, JobID: "job-1", Status: "completed", Total: 1, Failed: 1, DLQCount: 1,
		FailedItems: []FailedItem{{ItemID: "i" + hostileFormat, ErrorType: "CommandFailed", LastError: hostileFormat, Attempts: 1, ReprocessEligible: true}}}
	for name, md := range map[string]string{"summary": Summary(in), "comment": Comment(in)} {
		cmd := exec.Command(cmark, "--extension", "table", "--extension", "autolink", "--extension", "strikethrough")
		cmd.Stdin = strings.NewReader(md)
		html, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s: cmark-gfm: %v", name, err)
		}
		for _, r := range string(html) {
			if IsFormatChar(r) && r != '\u200b' {
				t.Errorf("%s: rendered HTML carries %U:\n%s", name, r, html)
				break
			}
		}
		if !strings.Contains(string(html), "⟨U+202E⟩") {
			t.Errorf("%s: the override is not shown:\n%s", name, html)
		}
	}
}
