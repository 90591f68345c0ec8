package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/prodigy-action/prodigy-action/cli/cmdutil"
)

// TestHelpAndUsageUseTheBinarysName: help, usage lines and hints call the
// program prodigy-action, the name README installs it under.
func TestHelpAndUsageUseTheBinarysName(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	_, out, _ := runCLI(t, home, "--help")
	if !strings.Contains(out, "Usage:\n  prodigy-action [flags]\n  prodigy-action [command]") ||
		!strings.Contains(out, `Use "prodigy-action [command] --help"`) {
		t.Errorf("root help:\n%s", out)
	}
	_, out, _ = runCLI(t, home, "dlq", "retry", "--help")
	if !strings.Contains(out, "Usage:\n  prodigy-action dlq retry") {
		t.Errorf("dlq retry help:\n%s", out)
	}
	code, _, errOut := runCLI(t, home, "dlq", "lst")
	if code != 2 || !strings.Contains(errOut, `(see prodigy-action dlq --help)`) {
		t.Errorf("hint: exit %d %s", code, errOut)
	}
	for _, args := range [][]string{{"--help"}, {"dlq", "--help"}, {"worktree", "--help"}, {"completion", "bash"}} {
		_, out, _ := runCLI(t, home, args...)
		for _, bad := range []string{"\n  action ", `"action `, " action [", "__start_action "} {
			if strings.Contains(out, bad) {
				t.Errorf("%v prints %q:\n%s", args, bad, out)
			}
		}
	}
}

// TestCompletionBashCompletesTheInstalledName sources `prodigy-action
// completion bash` in a real bash, with the real CLI (this test binary
// re-executed) on PATH as prodigy-action, and completes words through it.
func TestCompletionBashCompletesTheInstalledName(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	bin := t.TempDir()
	if err := os.Symlink(os.Args[0], filepath.Join(bin, "prodigy-action")); err != nil {
		t.Fatal(err)
	}
	// The script needs the bash-completion package's
	// _get_comp_words_by_ref; where that package is not installed, a
	// minimal one that reads bash's own COMP_WORDS stands in.
	script := `
if [ -r /usr/share/bash-completion/bash_completion ]; then
  . /usr/share/bash-completion/bash_completion
fi
if ! declare -F _get_comp_words_by_ref >/dev/null; then
  _get_comp_words_by_ref() { cur=${COMP_WORDS[COMP_CWORD]}; prev=${COMP_WORDS[COMP_CWORD-1]}; words=("${COMP_WORDS[@]}"); cword=$COMP_CWORD; }
fi
source <(prodigy-action completion bash) || exit 1
complete -p prodigy-action || exit 1
comp() {
  COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}; read -r -a COMP_WORDS <<< "$COMP_LINE"
  if [ "${COMP_LINE: -1}" = " " ]; then COMP_WORDS+=(""); fi
  COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))
  COMPREPLY=()
  $(complete -p prodigy-action | sed 's/.* -F \([^ ]*\) .*/\1/') prodigy-action "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
  echo "$*=> ${COMPREPLY[*]}"
}
comp prodigy-action dl
comp prodigy-action dlq re
comp prodigy-action in
`
	cmd := exec.Command("bash", "-c", script)
	cmd.Env = append(os.Environ(), "PRODIGY_ACTION_TEST_MAIN=1", "PRODIGY_HOME="+t.TempDir(),
		"PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("bash: %v\n%s", err, out)
	}
	for _, want := range []string{
		"complete -o default -F __start_prodigy-action prodigy-action\n",
		"prodigy-action dl=> dlq\n",
		"prodigy-action dlq re=> retry\n",
		"prodigy-action in=> init\n",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("completion lacks %q:\n%s", want, out)
		}
	}
}

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
		var out, errb bytes.Buffer
		f := cmdutil.NewFactory(strings.NewReader(""), &out, &errb, func(k string) string { return env[k] })
		f.BuildInfo = func() (*debug.BuildInfo, bool) { return bi, bi != nil }
		f.ClaudeVersionFile = file
		code := execute(context.Background(), f, args)
		return code, out.String() + errb.String()
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
