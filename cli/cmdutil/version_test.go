package cmdutil_test

import (
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/prodigy-action/prodigy-action/cli/clitest"
	"github.com/prodigy-action/prodigy-action/cli/cmdutil"
)

// TestVersionNamesModuleCommitAndClaudeCode: --version prints the module
// version and commit from the build information and the Claude Code
// version the image records (or the environment overrides); unknown parts
// say so.
func TestVersionNamesModuleCommitAndClaudeCode(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	vfile := filepath.Join(dir, "VERSION")
	if err := os.WriteFile(vfile, []byte("@anthropic-ai/claude-code-linux-x64@2.0.14\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(env map[string]string, bi *debug.BuildInfo, file string, args ...string) (int, string) {
		code, out, errOut := clitest.Run{Env: env, Setup: func(f *cmdutil.Factory) {
			f.BuildInfo = func() (*debug.BuildInfo, bool) { return bi, bi != nil }
			f.ClaudeVersionFile = file
		}}.Exec(args...)
		return code, out + errOut
	}
	bi := &debug.BuildInfo{Main: debug.Module{Path: "github.com/prodigy-action/prodigy-action", Version: "v1.2.3"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "0123abcd"}, {Key: "vcs.modified", Value: "true"}}}
	code, out := run(nil, bi, vfile, "--version")
	want := "prodigy-action v1.2.3\ncommit: 0123abcd (modified)\nclaude code: 2.0.14 (@anthropic-ai/claude-code-linux-x64@2.0.14)\n"
	if code != 0 || out != want {
		t.Errorf("--version: exit %d\n%q\nwant\n%q", code, out, want)
	}
	code, out = run(map[string]string{"PRODIGY_CLAUDE_CODE_VERSION": "2.1.0"}, nil, filepath.Join(dir, "none"), "-v")
	want = "prodigy-action (devel)\ncommit: unknown\nclaude code: 2.1.0\n"
	if code != 0 || out != want {
		t.Errorf("-v: exit %d\n%q\nwant\n%q", code, out, want)
	}
	code, out = run(nil, nil, filepath.Join(dir, "none"), "--version")
	if code != 0 || !strings.HasSuffix(out, "claude code: unknown\n") {
		t.Errorf("no Claude Code: exit %d %q", code, out)
	}
}
