package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The seed documents (../shared/seeds/*.md beside the repository: the
// product's spec, written by someone else) drive the conformance suite in
// seeds_test.go: it reads the files themselves, extracts their command and
// YAML/JSON examples and runs or validates every one. A missing seeds
// directory fails the suite loudly: it never skips.

// seedsDir finds the seeds: $PRODIGY_SEEDS_DIR when set (and nothing
// else), else ../shared/seeds beside the repository root (how CI clones
// main), else the same beside the main checkout when the repository is a
// linked git worktree (its .git file names the main checkout's .git
// directory).
func seedsDir(t *testing.T) string {
	t.Helper()
	var tried []string
	root, err := filepath.Abs("../..") // cmd/action → repository root
	if err != nil {
		t.Fatal(err)
	}
	if d := os.Getenv("PRODIGY_SEEDS_DIR"); d != "" {
		tried = append(tried, d)
	} else if b, err := os.ReadFile(filepath.Join(root, ".git")); err == nil && strings.HasPrefix(string(b), "gitdir: ") {
		tried = append(tried, filepath.Join(root, "..", "shared", "seeds"))
		// gitdir: <main>/.git/worktrees/<name>
		gitdir := strings.TrimSpace(strings.TrimPrefix(string(b), "gitdir: "))
		main := filepath.Dir(filepath.Dir(filepath.Dir(gitdir)))
		tried = append(tried, filepath.Join(main, "..", "shared", "seeds"))
	} else {
		tried = append(tried, filepath.Join(root, "..", "shared", "seeds"))
	}
	for _, d := range tried {
		if st, err := os.Stat(filepath.Join(d, "dlq-guide.md")); err == nil && !st.IsDir() {
			return d
		}
	}
	t.Fatalf("the seed documents are missing: looked for dlq-guide.md in %q (clone the shared/ folder beside the repository, or set PRODIGY_SEEDS_DIR); the conformance suite does not skip", tried)
	return ""
}

// readSeed returns the text of one seed document; a missing one fails t.
func readSeed(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(seedsDir(t), name))
	if err != nil {
		t.Fatalf("seed %s: %v", name, err)
	}
	return string(b)
}

// seedBlock is one example extracted from a seed document.
type seedBlock struct {
	Lang string // fence language ("bash", "json", "yaml", …); "" when unfenced
	Body string
	Line int // 1-based line of the block's first body line
}

var fenceRe = regexp.MustCompile("^(\\s*)```\\s*([A-Za-z0-9_-]*)\\s*$")

// fencedBlocks extracts the fenced code blocks of a Markdown text (fences
// may be indented, as inside list items; the indentation is removed from
// the body). A fence nested in a block of another indentation is body.
func fencedBlocks(text string) []seedBlock {
	var out []seedBlock
	lines := strings.Split(text, "\n")
	for i := 0; i < len(lines); i++ {
		m := fenceRe.FindStringSubmatch(lines[i])
		if m == nil {
			continue
		}
		indent, lang := m[1], m[2]
		var body []string
		j := i + 1
		for ; j < len(lines); j++ {
			if strings.TrimSpace(lines[j]) == "```" && strings.HasPrefix(lines[j], indent) && len(lines[j])-len(strings.TrimLeft(lines[j], " ")) == len(indent) {
				break
			}
			body = append(body, strings.TrimPrefix(lines[j], indent))
		}
		out = append(out, seedBlock{Lang: lang, Body: strings.Join(body, "\n"), Line: i + 2})
		i = j
	}
	return out
}

// seedCommandRe matches a command example line: `prodigy …` at the start
// (after indentation), or a shell line that runs prodigy in $( … ) or reads
// the state directory (~/.prodigy) or a Claude log (cat … | jq).
var seedCommandRe = regexp.MustCompile(`^\s*(prodigy |cat \$\(prodigy |ls ~/\.prodigy/|cat ~/\.prodigy/|jq '[^']*' ~/\.prodigy/|cat /path/to/|cat ~/\.local/)`)

// seedCommands returns every command example of a seed, in document
// order: the command lines of its fenced bash blocks and, for the seeds
// that were saved as rendered pages (no fences), every line that
// seedCommandRe matches. A trailing "# comment" is kept (bash ignores it).
func seedCommands(text string) []string {
	var out []string
	blocks := fencedBlocks(text)
	if len(blocks) == 0 {
		for _, l := range strings.Split(text, "\n") {
			if seedCommandRe.MatchString(l) {
				out = append(out, strings.TrimSpace(l))
			}
		}
		return out
	}
	for _, b := range blocks {
		if b.Lang != "bash" {
			continue
		}
		for _, l := range strings.Split(b.Body, "\n") {
			if seedCommandRe.MatchString(l) {
				out = append(out, strings.TrimSpace(l))
			}
		}
	}
	// A markdown block quoted inside a fence (spec 138's CLAUDE.md text)
	// holds a bash fence of its own.
	for _, b := range blocks {
		if b.Lang == "markdown" {
			out = append(out, seedCommands(b.Body)...)
		}
	}
	return out
}

var (
	yamlStartRe = regexp.MustCompile(`^(retry_config:|name: |# Source: Workflow)`)
	yamlKeyRe   = regexp.MustCompile(`^[a-z_]+:( |$)`)
)

// plainYAMLBlocks extracts the YAML examples of a seed saved as a rendered
// page (no fences): a block starts at a column-0 line `retry_config:`,
// `name: ` or a `# Source: Workflow` comment, and goes on over indented
// lines, blank lines and lower-case column-0 keys; prose (capitalised) ends
// it.
func plainYAMLBlocks(text string) []seedBlock {
	var out []seedBlock
	lines := strings.Split(text, "\n")
	for i := 0; i < len(lines); i++ {
		if !yamlStartRe.MatchString(lines[i]) {
			continue
		}
		j := i + 1
		for ; j < len(lines); j++ {
			l := lines[j]
			if l == "" || strings.HasPrefix(l, " ") || yamlKeyRe.MatchString(l) {
				continue
			}
			break
		}
		body := strings.TrimRight(strings.Join(lines[i:j], "\n"), "\n")
		out = append(out, seedBlock{Lang: "yaml", Body: body, Line: i + 1})
		i = j - 1
	}
	return out
}

// seedJSONBlocks returns the JSON examples of a seed: fenced json blocks,
// and for rendered pages every column-0 "{" … "}" block (optionally after
// a "# Source" comment). Comments ("// …", "# Source: …") and the pages'
// "// (1)!" annotations are removed so the result parses.
func seedJSONBlocks(text string) []seedBlock {
	var out []seedBlock
	blocks := fencedBlocks(text)
	if len(blocks) > 0 {
		for _, b := range blocks {
			if b.Lang == "json" {
				b.Body = stripJSONComments(b.Body)
				out = append(out, b)
			}
		}
		return out
	}
	lines := strings.Split(text, "\n")
	for i := 0; i < len(lines); i++ {
		if lines[i] != "{" {
			continue
		}
		j := i + 1
		for ; j < len(lines) && lines[j] != "}"; j++ {
		}
		if j == len(lines) {
			break
		}
		out = append(out, seedBlock{Lang: "json", Body: stripJSONComments(strings.Join(lines[i:j+1], "\n")), Line: i + 1})
		i = j
	}
	return out
}

var (
	jsonLineCommentRe = regexp.MustCompile(`(?m)\s*//.*$`)
	jsonHashCommentRe = regexp.MustCompile(`(?m)^\s*#.*$`)
)

// stripJSONComments removes // line comments outside strings (the seeds
// put them after values) and # comment lines. A "//" inside a string (a
// URL) would be cut too; no seed JSON example has one.
func stripJSONComments(s string) string {
	var b strings.Builder
	for _, l := range strings.Split(s, "\n") {
		if jsonHashCommentRe.MatchString(l) {
			continue
		}
		b.WriteString(jsonLineCommentRe.ReplaceAllString(l, ""))
		b.WriteByte('\n')
	}
	return b.String()
}

// TestSeedSuiteFailsWithoutTheSeeds: with no seeds directory the suite
// fails and says why; it never skips.
func TestSeedSuiteFailsWithoutTheSeeds(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run", "^TestSeedBackoffExamples$", "-test.v")
	cmd.Env = append(os.Environ(), "PRODIGY_SEEDS_DIR="+filepath.Join(t.TempDir(), "no-seeds"))
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "the seed documents are missing") || strings.Contains(string(out), "--- SKIP") {
		t.Errorf("suite without seeds: %v\n%s", err, out)
	}
}
