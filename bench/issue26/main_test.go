package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestMedianAndRange(t *testing.T) {
	if s := of([]float64{3, 1, 2}); s != (stat{2, 1, 3}) {
		t.Errorf("of(3,1,2) = %+v", s)
	}
	if s := of([]float64{4, 1, 2, 3}); s != (stat{2.5, 1, 4}) {
		t.Errorf("of(4,1,2,3) = %+v", s)
	}
	if thousands(100000) != "100,000" || thousands(1000) != "1,000" || thousands(999) != "999" {
		t.Error("thousands: wrong")
	}
	if met(1.5, 1.5) != "met" || met(1.51, 1.5) == "met" || met(0, 1) == "met" {
		t.Error("met: wrong verdicts")
	}
}

// TestSummariseReadsEveryRun writes the files a run of run.sh leaves for
// two repetitions of the gather and yardstick benchmarks and checks the
// medians and verdicts the report gives.
func TestSummariseReadsEveryRun(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("commit", "0123456789abcdef\n")
	write("progress.log", "2026-11-28T21:00:00Z load 1.00 1.0 1.0 start sh-1x200-1\n2026-11-28T21:00:05Z load 3.00 1.0 1.0 end sh-1x200-1 rc=0\n")
	write("sh-1x200-1.json", `{"gather_s":0.1,"gather_merge_import_s":0.01,"every_item_accounted_once":true}`)
	write("sh-1x200-2.json", `{"gather_s":0.3,"gather_merge_import_s":0.01,"every_item_accounted_once":true}`)
	// Target per run: 2 × (0.2 + merges) = 2.4 and 2.2 s.
	write("sh-50x200-1.json", `{"gather_s":2.4,"gather_merge_import_s":1.0,"every_item_accounted_once":true}`)
	write("sh-50x200-2.json", `{"gather_s":3.3,"gather_merge_import_s":0.9,"every_item_accounted_once":true}`)
	write("y-1k-disk-1.json", `{"cpu_split":[{"kind":"strong","git":[{"command":"script reset","cpu_ms_per_item":4},{"command":"script commit","cpu_ms_per_item":9},{"command":"script add","cpu_ms_per_item":9},{"command":"script merge-tree","cpu_ms_per_item":2}]}],`+
		`"yardstick":{"engine_own_cpu_ms_per_item":12,"floor_before_cpu_ms_per_item":4,"floor_after_cpu_ms_per_item":4,"floor_cpu_ms_per_item":4,"ratio":3}}`)
	write("y-1k-tmpfs-1.json", `{"yardstick":{"engine_own_cpu_ms_per_item":9,"floor_before_cpu_ms_per_item":4,"floor_after_cpu_ms_per_item":6,"floor_cpu_ms_per_item":5,"ratio":1.8}}`)
	write("y-10k-tmpfs-1.json", `{"cpu_speedup_vs_strong_baseline":1.25,"yardstick":{"engine_own_cpu_ms_per_item":30,"floor_before_cpu_ms_per_item":20,"floor_after_cpu_ms_per_item":20,"floor_cpu_ms_per_item":20,"ratio":1.5,"strong_ratio":1.4}}`)
	write("sc-commits-1.json", `{"runs":[{"n":1000,"bookkeeping_cpu_ms_per_item":8,"tree_cpu_ms_per_item":20,"merge_ms_per_item":6,"peak_rss_mib":35,"check_ok":true},`+
		`{"n":10000,"bookkeeping_cpu_ms_per_item":9,"tree_cpu_ms_per_item":22,"merge_ms_per_item":7,"peak_rss_mib":48,"check_ok":true},`+
		`{"n":1000,"bookkeeping_cpu_ms_per_item":6,"tree_cpu_ms_per_item":18,"merge_ms_per_item":5,"peak_rss_mib":36,"check_ok":true}],`+
		`"commit_ratios":[{"n":10000,"runner_cpu":1.29,"tree_cpu":1.16,"merge":1.27}]}`)
	var out bytes.Buffer
	if err := summarise(&out, dir); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{
		"commit 0123456789ab",
		"| 1 × 200 | 0.200 (0.100–0.300) |",
		"1.25 (1.00–1.50)× of 2 × (one shard's gather, median 0.200 s, + that run's merges) (target ≤ 1.0: **not met**)",
		"Every item accounted for once in every run: true",
		"| 1,000 | tmpfs | 1 |",
		"3.00 (3.00–3.00): **not met** | 1.50 (1.50–1.50) |",
		"1.80 (1.80–1.80): **not met**",
		"1.50 (1.50–1.50): met | 1.40 (1.40–1.40) | 0.80 (0.80–0.80): met |",
		"load 1.0–3.0",
		"Item 2 (the DLQ artifact): no runs in this directory.",
		"| 1,000 | 0 | 7.00 (6.00–8.00) |",
		"runner CPU 1.29 (1.29–1.29), tree CPU 1.16 (1.16–1.16), merge 1.27 (1.27–1.27); target ≤ 1.2×: **not met**",
		"at most 48.0 MiB",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("report lacks %q:\n%s", want, got)
		}
	}
}
