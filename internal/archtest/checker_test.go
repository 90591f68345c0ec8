package archtest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The checks above must be able to fail: these cases feed them violations.

func TestForbiddenEdges(t *testing.T) {
	for _, tc := range []struct {
		node, pkg, dep string
		ok             bool
	}{
		{"report", "report", "runner", true},
		{"runner", "runner", "report", false},
		{"runner", "runner", "jobstore", true},
		{"jobstore", "jobstore", "internal/fsx", true},
		{"dlq", "dlq", "jobstore", false},
		{"(leaves)", "internal/fsx", "dlq", false},
		{"(leaves)", "redact", "internal/fsx", true},
		{"cmd/action", "cmd/action/run", "cmd/action", true},
		{"cmd/action", "cmd/action", "items", false},
		{"runner", "runner", "bench/engine", false},
		{"retry", "retry/retrytest", "retry", true},
		{"config", "config", "somewhere/new", false},
	} {
		why := forbidden(tc.node, tc.pkg, tc.dep)
		if (why == "") != tc.ok {
			t.Errorf("%s (%s) -> %s: forbidden = %q, want allowed %v", tc.pkg, tc.node, tc.dep, why, tc.ok)
		}
	}
	if nodeOf("retry/retrytest") != "retry" || nodeOf("cmd/action/x") != "cmd/action" || nodeOf("internal/fsx") != "" {
		t.Error("nodeOf maps subpackages wrongly")
	}
}

func TestGitCallsFindsEveryForm(t *testing.T) {
	src := `package p

import (
	"context"
	osexec "os/exec"
)

const gitBin = "/usr/bin/git"

func f(ctx context.Context) {
	_ = osexec.Command("git", "status")
	_ = osexec.CommandContext(ctx, "git", "push")
	_ = osexec.Command(gitBin)
	_, _ = osexec.LookPath("git")
	_ = &osexec.Cmd{Path: "git"}
	_ = osexec.Command("bash", "-c", "git status")
	_ = osexec.Command("gitk")
}
`
	path := filepath.Join(t.TempDir(), "p.go")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	found, err := gitCalls(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(found) != 5 {
		t.Fatalf("found %d git calls, want 5:\n%s", len(found), strings.Join(found, "\n"))
	}
	for i, want := range []string{":11:", ":12:", ":13:", ":14:", ":15:"} {
		if !strings.Contains(found[i], want) {
			t.Errorf("call %d = %s, want line %s", i, found[i], want)
		}
	}
}
