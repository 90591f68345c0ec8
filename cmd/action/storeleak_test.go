package main

import (
	"path/filepath"
	"testing"

	"github.com/prodigy-action/prodigy-action/dlq"
)

// TestEveryDLQStoreIsClosed runs every command that opens a job's DLQ, in
// process, and checks after each that no store was left open (an open
// store may hold an index it has not written). Not parallel: the count is
// the process's.
func TestEveryDLQStoreIsClosed(t *testing.T) {
	repo := cliRepo(t, map[string]string{"items.json": numberedItems(4)})
	wf := writeWorkflow(t, `
name: leak
map:
  input: items.json
  max_parallel: 2
  agent_template:
    - shell: |
        if [ $(( ${item.n} % 2 )) = 1 ]; then echo "odd item" >&2; exit 1; fi
        echo "${item.n}" > "f${item.n}.txt" && git add -A && git commit -qm "item ${item.n}"
`)
	home := t.TempDir()
	export := filepath.Join(t.TempDir(), "dlq.json")
	base := dlq.OpenStores()
	for _, args := range [][]string{
		{"run", wf, "--repo", repo, "--job-id", "leak"},
		{"status", "leak"}, {"status", "leak", "--json"}, {"jobs"},
		{"dlq", "list", "--job-id", "leak"}, {"dlq", "inspect", "item_1", "--job-id", "leak"},
		{"dlq", "stats", "--job-id", "leak"}, {"dlq", "analyze", "--job-id", "leak"},
		{"dlq", "export", export, "--job-id", "leak"},
		{"dlq", "retry", "leak", "--dry-run"}, {"dlq", "retry", "leak", "--signature", "CommandFailed::odd item", "--sample", "1", "--dry-run"},
		{"dlq", "retry", "leak"}, {"resume", "leak", "--include-dlq"},
		{"dlq", "clear", "leak", "--yes"},
	} {
		code, _, errOut := runCLI(t, home, args...)
		if code > 1 {
			t.Fatalf("%v: exit %d\n%s", args, code, errOut)
		}
		if n := dlq.OpenStores() - base; n != 0 {
			t.Errorf("%v left %d DLQ store(s) open", args, n)
		}
	}
}
