package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

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
