package ghaction_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/sethvargo/go-githubactions"

	"github.com/prodigy-action/prodigy-action/ghaction"
	"github.com/prodigy-action/prodigy-action/ghaction/ghactiontest"
)

// hostile is agent output that tries every workflow command.
const hostile = `normal line
::error::pwned annotation
  ::warning file=x.go,line=1::indented warning
::set-output name=dlq-count::0
::add-mask::innocent
::group::fake group
::endgroup::
##[error]legacy error
prefix ##[set-output name=x;]legacy output
::stop-commands::x
::x::
::notice::after a fake resume`

func names(cmds []ghactiontest.Command) []string {
	var out []string
	for _, c := range cmds {
		out = append(out, c.Name+":"+c.Data)
	}
	return out
}

func TestParseSeesHostileCommands(t *testing.T) {
	// The parser itself must see the attack, or the other tests prove nothing.
	got := names(ghactiontest.Parse(hostile))
	want := []string{"error:pwned annotation", "warning:indented warning", "set-output:0", "add-mask:innocent",
		"group:fake group", "endgroup:", "error:legacy error", "set-output:legacy output", "notice:after a fake resume"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("Parse(hostile) = %q\nwant %q", got, want)
	}
}

func TestEchoUntrusted(t *testing.T) {
	var out bytes.Buffer
	gha := githubactions.New(githubactions.WithWriter(&out))
	gha.AddMask("before-mask")
	if err := ghaction.EchoUntrusted(&out, hostile); err != nil {
		t.Fatal(err)
	}
	if err := ghaction.EchoUntrusted(&out, "no newline at end ::error::x"); err != nil {
		t.Fatal(err)
	}
	gha.Errorf("ours")
	gha.AddMask("after-mask")
	gha.Group("our group")
	gha.EndGroup()
	got := names(ghactiontest.Parse(out.String()))
	want := []string{"add-mask:before-mask", "error:ours", "add-mask:after-mask", "group:our group", "endgroup:"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("commands = %q\nwant %q\noutput:\n%s", got, want, out.String())
	}
	if !strings.Contains(out.String(), "::error::pwned annotation\n") {
		t.Error("the untrusted text was not echoed as is")
	}
}

func TestNeutralizeWriter(t *testing.T) {
	for _, size := range []int{1, 2, 5, len(hostile)} {
		var out bytes.Buffer
		w := ghaction.NeutralizeWriter(&out)
		for i := 0; i < len(hostile); i += size {
			if _, err := w.Write([]byte(hostile[i:min(len(hostile), i+size)])); err != nil {
				t.Fatal(err)
			}
		}
		if cmds := ghactiontest.Parse(out.String()); len(cmds) != 0 {
			t.Errorf("write size %d: commands survive: %q\n%s", size, names(cmds), out.String())
		}
		if !strings.Contains(out.String(), "pwned annotation") || !strings.HasPrefix(out.String(), "normal line\n") {
			t.Errorf("text lost: %s", out.String())
		}
	}
}
