package runner_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTenMegabyteValuesReachSteps: a 10 MB item field and a 10 MB captured
// output reach shell steps intact (one environment string is limited to
// 128 KiB), and the item is readable from PRODIGY_ITEM_FILE.
func TestTenMegabyteValuesReachSteps(t *testing.T) {
	t.Parallel()
	blob := strings.Repeat("0123456789abcdef $(touch pwned)\n", 10<<20/32)
	data, _ := json.Marshal([]map[string]string{{"blob": blob}})
	r := newTestRepo(t, map[string]string{"items.json": string(data)})
	out := t.TempDir()
	wf := r.Workflow(fmt.Sprintf(`
name: large
map:
  input: items.json
  agent_template:
    - shell: printf '%%s' "${item.blob}" > %[1]s/field
    - shell: |
        test -z "${PRODIGY_ITEM:-}" || exit 3
        cp "$PRODIGY_ITEM_FILE" %[1]s/item.json
    - shell: cat %[1]s/field
      capture_output: big
    - shell: printf '%%s' "${big}" > %[1]s/captured
`, out))
	o, _, stderr, _ := r.options(wf)
	res, err := r.run(o)
	if err != nil || res.Successful != 1 {
		t.Fatalf("run: %v %+v\n%s", err, res, stderr)
	}
	if got, _ := os.ReadFile(filepath.Join(out, "field")); string(got) != blob {
		t.Errorf("field: %d bytes, want %d", len(got), len(blob))
	}
	if got, _ := os.ReadFile(filepath.Join(out, "captured")); string(got) != strings.TrimRight(blob, "\n") {
		t.Errorf("captured: %d bytes, want %d", len(got), len(blob)-1)
	}
	var item map[string]string
	if b, _ := os.ReadFile(filepath.Join(out, "item.json")); json.Unmarshal(b, &item) != nil || item["blob"] != blob {
		t.Errorf("PRODIGY_ITEM_FILE does not hold the item")
	}
	if m, _ := filepath.Glob(filepath.Join(r.Home, "worktrees", "*", "*", "*", "pwned")); len(m) > 0 {
		t.Fatal("payload ran")
	}
}

// TestTooLargeEnvValueIsPermanent: a step env value that cannot be passed
// fails the item once, with a clear message, without retries.
func TestTooLargeEnvValueIsPermanent(t *testing.T) {
	t.Parallel()
	blob := strings.Repeat("x", 200<<10)
	data, _ := json.Marshal([]map[string]string{{"blob": blob}})
	r := newTestRepo(t, map[string]string{"items.json": string(data)})
	wf := r.Workflow(`
name: toolarge
map:
  input: items.json
  retry_config: {attempts: 3, backoff: fixed, initial_delay: 1ms}
  agent_template:
    - shell: echo hi
      env: {BLOB: "${item.blob}"}
`)
	o, _, stderr, _ := r.options(wf)
	res, _ := r.run(o)
	if res == nil || res.Failed != 1 {
		t.Fatalf("result %+v\n%s", res, stderr)
	}
	recs := r.DLQRecords(res.JobID)
	if len(recs) != 1 {
		t.Fatalf("%d records", len(recs))
	}
	for _, rec := range recs {
		last, _ := rec.LastFailure()
		if rec.FailureCount != 1 || !strings.Contains(last.ErrorMessage, "environment variable BLOB") {
			t.Errorf("record: count %d, error %q", rec.FailureCount, last.ErrorMessage)
		}
	}
}

// TestValueFilesLiveInOnePrivateJobDirectory: every step's PRODIGY_ITEM_FILE
// is a 0600 file in one 0700 directory of the job, holds that step's item,
// is gone when its step ends, and the directory is gone when the job ends.
// Not parallel: it points TMPDIR at its own directory.
func TestValueFilesLiveInOnePrivateJobDirectory(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	r := newTestRepo(t, map[string]string{"items.json": itemsJSON(4)})
	out := t.TempDir()
	wf := r.Workflow(fmt.Sprintf(`
name: values
map:
  input: items.json
  max_parallel: 2
  agent_template:
    - shell: |
        f="$PRODIGY_ITEM_FILE"
        printf '%%s %%s %%s %%s\n' "$f" "$(stat -c %%a "$f")" "$(stat -c %%a "$(dirname "$f")")" "$(cat "$f")" >> %[1]s/seen
    - shell: printf '%%s\n' "$PRODIGY_ITEM_FILE" >> %[1]s/second
`, out))
	o, _, stderr, _ := r.options(wf)
	res, err := r.run(o)
	if err != nil || res.Successful != 4 {
		t.Fatalf("run: %v %+v\n%s", err, res, stderr)
	}
	seen, _ := os.ReadFile(filepath.Join(out, "seen"))
	lines := strings.Split(strings.TrimSpace(string(seen)), "\n")
	if len(lines) != 4 {
		t.Fatalf("seen:\n%s", seen)
	}
	dirs, items := map[string]bool{}, map[string]bool{}
	for _, l := range lines {
		f := strings.Fields(l)
		if len(f) != 4 || f[1] != "600" || f[2] != "700" {
			t.Errorf("value file %q: want a 0600 file in a 0700 directory", l)
			continue
		}
		dirs[filepath.Dir(f[0])] = true
		items[f[3]] = true
		if _, err := os.Stat(f[0]); err == nil {
			t.Errorf("%s outlived its step", f[0])
		}
	}
	if len(dirs) != 1 || len(items) != 4 {
		t.Errorf("directories %v, items %v: want one directory, four different items", dirs, items)
	}
	for d := range dirs {
		if filepath.Dir(d) != tmp {
			t.Errorf("value directory %s is not under TMPDIR %s", d, tmp)
		}
	}
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Errorf("left in TMPDIR after the job: %v", left)
	}
	second, _ := os.ReadFile(filepath.Join(out, "second"))
	if strings.Contains(string(seen), strings.SplitN(string(second), "\n", 2)[0]+" ") {
		t.Errorf("a later step got the path of an earlier step's file")
	}
}

// TestStepCannotPlantALaterStepsValueFile: a step that fills the job's
// value directory with files and links named like the value files of the
// steps after it (run numbers 1 to 200) changes nothing for them: every
// item still gets its own item in PRODIGY_ITEM_FILE, and the link's target
// is untouched.
func TestStepCannotPlantALaterStepsValueFile(t *testing.T) {
	t.Parallel()
	outside := filepath.Join(t.TempDir(), "victim.json")
	if err := os.WriteFile(outside, []byte("victim"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := newTestRepo(t, map[string]string{"items.json": itemsJSON(4)})
	out := t.TempDir()
	wf := r.Workflow(fmt.Sprintf(`
name: plant
map:
  input: items.json
  max_parallel: 1
  agent_template:
    - shell: |
        d=$(dirname "$PRODIGY_ITEM_FILE")
        if [ "${item.n}" = 0 ]; then
          for k in $(seq 1 200); do ln -s %[2]q "$d/$k-item.json"; echo planted > "$d/$k-x-item.json"; done
        fi
        cat "$PRODIGY_ITEM_FILE" >> %[1]s/seen; echo >> %[1]s/seen
`, out, outside))
	o, _, stderr, _ := r.options(wf)
	res, err := r.run(o)
	if err != nil || res.Successful != 4 {
		t.Fatalf("run: %v %+v\n%s", err, res, stderr)
	}
	seen, _ := os.ReadFile(filepath.Join(out, "seen"))
	for n := range 4 {
		if !strings.Contains(string(seen), fmt.Sprintf(`"n":%d`, n)) && !strings.Contains(string(seen), fmt.Sprintf(`"n": %d`, n)) {
			t.Errorf("item %d did not read its own item:\n%s", n, seen)
		}
	}
	if b, _ := os.ReadFile(outside); string(b) != "victim" {
		t.Errorf("the planted link's target was written: %q", b)
	}
}
