package cli_test

import (
	"strings"
	"testing"

	"github.com/prodigy-action/prodigy-action/cli/clitest"
)

// TestHelpAndUsageUseTheBinarysName: help, usage lines and hints call the
// program prodigy-action, the name README installs it under.
func TestHelpAndUsageUseTheBinarysName(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	_, out, _ := clitest.Home(home, "--help")
	if !strings.Contains(out, "Usage:\n  prodigy-action [flags]\n  prodigy-action [command]") ||
		!strings.Contains(out, `Use "prodigy-action [command] --help"`) {
		t.Errorf("root help:\n%s", out)
	}
	_, out, _ = clitest.Home(home, "dlq", "retry", "--help")
	if !strings.Contains(out, "Usage:\n  prodigy-action dlq retry") {
		t.Errorf("dlq retry help:\n%s", out)
	}
	code, _, errOut := clitest.Home(home, "dlq", "lst")
	if code != 2 || !strings.Contains(errOut, `(see prodigy-action dlq --help)`) {
		t.Errorf("hint: exit %d %s", code, errOut)
	}
	for _, args := range [][]string{{"--help"}, {"dlq", "--help"}, {"worktree", "--help"}, {"completion", "bash"}} {
		_, out, _ := clitest.Home(home, args...)
		for _, bad := range []string{"\n  action ", `"action `, " action [", "__start_action "} {
			if strings.Contains(out, bad) {
				t.Errorf("%v prints %q:\n%s", args, bad, out)
			}
		}
	}
}
