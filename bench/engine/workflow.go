package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// agentScript is the work of one item, identical in the engine's workflow
// and in the baseline: write out/item-<n>.txt and commit it — or, with
// -slots K (BENCH_SLOTS in the environment), out/item-<n mod K>.txt, so
// the repository stops growing after K items and later items change
// files earlier ones wrote. The engine inserts ${item.n}; the baseline
// sets the shell variable. (Only builtins are added: no process.)
const agentScript = `mkdir -p out
f=${item.n}
[ "${BENCH_SLOTS:-0}" -gt 0 ] && f=$((f % BENCH_SLOTS))
printf 'item %s\n' "${item.n}" > "out/item-$f.txt"
git add "out/item-$f.txt"
git commit -q -m "item ${item.n}"
`

// slots is -slots: the number of distinct files items write (0: one each).
var slots int

// stepStartLine, first in the engine's agent step, appends the time the
// step started (bash's $EPOCHREALTIME: no process spawned) to the file
// named by $BENCH_STEP_STARTS, when set: time_to_first_agent is measured
// up to the first step that runs, after its worktree is ready.
const stepStartLine = `[ -z "$BENCH_STEP_STARTS" ] || echo "$EPOCHREALTIME" >> "$BENCH_STEP_STARTS"
`

// itemContent is what agentScript writes for item n.
func itemContent(n int) string { return "item " + strconv.Itoa(n) + "\n" }

// itemPath is the file agentScript writes for item n.
func itemPath(n int) string {
	if slots > 0 {
		n %= slots
	}
	return "out/item-" + strconv.Itoa(n) + ".txt"
}

// writeWorkflow writes items-<n>.json ({"items":[{"n":1},…]}) and
// workflow-<n>.yml (a map-only workflow running agentScript per item) into
// dir and returns the workflow's path. The input path is absolute, so it
// lives outside the benchmarked repository.
func writeWorkflow(dir string, n int) (string, error) {
	type item struct {
		N int `json:"n"`
	}
	list := struct {
		Items []item `json:"items"`
	}{Items: make([]item, n)}
	for i := range n {
		list.Items[i].N = i + 1
	}
	data, err := json.Marshal(list)
	if err != nil {
		return "", fmt.Errorf("failed to encode items: %w", err)
	}
	itemsPath := filepath.Join(dir, fmt.Sprintf("items-%d.json", n))
	if err := os.WriteFile(itemsPath, data, 0o644); err != nil {
		return "", fmt.Errorf("failed to write items: %w", err)
	}
	wf := fmt.Sprintf(`name: bench-engine
mode: mapreduce
map:
  input: %s
  json_path: "$.items[*]"
  agent_template:
    - shell: |
%s%s`, strconv.Quote(itemsPath), indent(stepStartLine, "        "), indent(agentScript, "        "))
	wfPath := filepath.Join(dir, fmt.Sprintf("workflow-%d.yml", n))
	if err := os.WriteFile(wfPath, []byte(wf), 0o644); err != nil {
		return "", fmt.Errorf("failed to write workflow: %w", err)
	}
	return wfPath, nil
}

// indent prefixes every line of s with pad.
func indent(s, pad string) string {
	out := make([]byte, 0, len(s)+8*len(pad))
	start := true
	for i := 0; i < len(s); i++ {
		if start {
			out = append(out, pad...)
		}
		out = append(out, s[i])
		start = s[i] == '\n'
	}
	return string(out)
}
