package main

import (
	"fmt"
	"io"
)

// scaleReport is what bench/scale -json prints (the fields used here).
type scaleReport struct {
	Runs []struct {
		N                int     `json:"n"`
		Windowed         bool    `json:"windowed"`
		WindowItems      int     `json:"window_items"`
		FirstItemS       float64 `json:"first_item_s"`
		RunnerCPU        float64 `json:"bookkeeping_cpu_ms_per_item"`
		TreeCPU          float64 `json:"tree_cpu_ms_per_item"`
		Merge            float64 `json:"merge_ms_per_item"`
		PeakRSSMiB       float64 `json:"peak_rss_mib"`
		StatusJSONS      float64 `json:"status_json_s"`
		StatusJSONFirstS float64 `json:"status_json_first_byte_s"`
		StatusJSONRSSMiB float64 `json:"status_json_rss_mib"`
		ResumeFirstItemS float64 `json:"resume_first_item_s"`
		ResumePeakMiB    float64 `json:"resume_peak_rss_mib"`
		CheckOK          bool    `json:"check_ok"`
	} `json:"runs"`
	Commits []struct {
		N         int     `json:"n"`
		RunnerCPU float64 `json:"runner_cpu"`
		TreeCPU   float64 `json:"tree_cpu"`
		Merge     float64 `json:"merge"`
	} `json:"commit_ratios"`
}

// commitsSection is item 1: items that commit at N = 1,000, 10,000 and
// 100,000 (windowed), each invocation's ratios to its own N = 1,000.
func commitsSection(w io.Writer, dir string, loads loadLog) error {
	rs, names := runs[scaleReport](w, dir, "sc-commits")
	if len(rs) == 0 {
		return none(w, "Item 1 (items that commit)")
	}
	fmt.Fprintf(w, "Item 1, items that commit (bench/scale -commits 100 -files 1000 -max-parallel 2 -n 1000,10000,100000,1000; %d invocations, load %s):\n\n", len(rs), loads.of(names))
	fmt.Fprintln(w, "| N | items measured | runner CPU ms/item | tree CPU ms/item | merge ms/item | peak RSS MiB |")
	fmt.Fprintln(w, "| ---: | ---: | ---: | ---: | ---: | ---: |")
	type fig struct{ items, runner, tree, merge, rss []float64 }
	byN := map[int]*fig{}
	var order []int
	ratios := map[int]*fig{}
	allOK := true
	for _, r := range rs {
		for _, run := range r.Runs {
			allOK = allOK && run.CheckOK
			f := byN[run.N]
			if f == nil {
				f = &fig{}
				byN[run.N] = f
				order = append(order, run.N)
			}
			f.items = append(f.items, float64(run.WindowItems))
			f.runner = append(f.runner, run.RunnerCPU)
			f.tree = append(f.tree, run.TreeCPU)
			f.merge = append(f.merge, run.Merge)
			f.rss = append(f.rss, run.PeakRSSMiB)
		}
		// bench/scale's own ratios: each run over the mean of the
		// invocation's N = 1,000 runs (run first and last).
		for _, c := range r.Commits {
			q := ratios[c.N]
			if q == nil {
				q = &fig{}
				ratios[c.N] = q
			}
			q.runner = append(q.runner, c.RunnerCPU)
			q.tree = append(q.tree, c.TreeCPU)
			q.merge = append(q.merge, c.Merge)
		}
	}
	var peak float64
	for _, n := range order {
		f := byN[n]
		fmt.Fprintf(w, "| %s | %.0f | %s | %s | %s | %s |\n", thousands(n), of(f.items).med, of(f.runner).f(2), of(f.tree).f(2), of(f.merge).f(2), of(f.rss).f(1))
		peak = max(peak, of(f.rss).hi)
	}
	fmt.Fprintln(w)
	for _, n := range order {
		q := ratios[n]
		if q == nil {
			continue
		}
		target := 1.2
		if n >= 100000 {
			target = 1.5
		}
		r, t, m := of(q.runner), of(q.tree), of(q.merge)
		fmt.Fprintf(w, "- N = %s over N = 1,000 (each invocation's own N = 1,000 runs): runner CPU %s, tree CPU %s, merge %s; target ≤ %.1f×: %s.\n",
			thousands(n), r.f(2), t.f(2), m.f(2), target, met(max(r.med, t.med, m.med), target))
	}
	fmt.Fprintf(w, "- Peak RSS, every run: at most %.1f MiB (the stated bound: about 64 MiB, whatever N).\n", peak)
	fmt.Fprintf(w, "- Every run's checks (items accounted for, branch and checkpoint agree): %v.\n", allOK)
	return nil
}

// millionSection is items 1 and 5 at a million items: the no-op job's
// first item, its status --json and peak RSS, and its resume.
func millionSection(w io.Writer, dir string, loads loadLog) error {
	rs, names := runs[scaleReport](w, dir, "sc-1m")
	if len(rs) == 0 {
		return none(w, "Items 1 and 5 (a million items)")
	}
	var first, rss, sj, sjFirst, sjRSS, rFirst, rRSS []float64
	ok := true
	for _, r := range rs {
		for _, run := range r.Runs {
			if run.N != 1000000 {
				continue
			}
			ok = ok && run.CheckOK
			first = append(first, run.FirstItemS)
			rss = append(rss, run.PeakRSSMiB)
			sj = append(sj, run.StatusJSONS)
			sjFirst = append(sjFirst, run.StatusJSONFirstS)
			sjRSS = append(sjRSS, run.StatusJSONRSSMiB)
			rFirst = append(rFirst, run.ResumeFirstItemS)
			rRSS = append(rRSS, run.ResumePeakMiB)
		}
	}
	fmt.Fprintf(w, "Items 1 and 5, the million-item no-op job (bench/scale -n 1000000 -window 30s -resume 10s; %d runs, load %s):\n\n", len(first), loads.of(names))
	fmt.Fprintln(w, "| figure | median (range) | target |")
	fmt.Fprintln(w, "| --- | ---: | --- |")
	fmt.Fprintf(w, "| first item, s | %s | ≤ 5 s: %s |\n", of(first).f(2), met(of(first).med, 5))
	fmt.Fprintf(w, "| peak RSS of the run, MiB | %s | tens of MiB (bound ≈ 64, whatever N) |\n", of(rss).f(1))
	fmt.Fprintf(w, "| resume: first item, s | %s | |\n", of(rFirst).f(2))
	fmt.Fprintf(w, "| resume: peak RSS, MiB | %s | |\n", of(rRSS).f(1))
	fmt.Fprintf(w, "| status --json: first byte, s | %s | fast |\n", of(sjFirst).f(3))
	fmt.Fprintf(w, "| status --json: whole, s | %s | |\n", of(sj).f(2))
	fmt.Fprintf(w, "| status --json: peak RSS, MiB | %s | flat |\n", of(sjRSS).f(1))
	fmt.Fprintf(w, "\nEvery run's checks: %v.\n", ok)
	return nil
}

// dlqReport is what bench/dlq -json prints (the fields used here).
type dlqReport struct {
	Records  int `json:"records"`
	Commands []struct {
		Name      string  `json:"name"`
		WallMS    float64 `json:"wall_ms"`
		MaxRSSMiB float64 `json:"max_rss_mib"`
	} `json:"commands"`
}

// dlqSection is item 2: the DLQ artifact of a million records against a
// cat of them.
func dlqSection(w io.Writer, dir string, loads loadLog) error {
	rs, names := runs[dlqReport](w, dir, "dlq-1m")
	if len(rs) == 0 {
		return none(w, "Item 2 (the DLQ artifact)")
	}
	var cat, art, ratio, rss []float64
	for _, r := range rs {
		var c, a float64
		for _, cmd := range r.Commands {
			switch cmd.Name {
			case "cat of the records":
				c = cmd.WallMS / 1000
			case "artifact build+upload":
				a = cmd.WallMS / 1000
				rss = append(rss, cmd.MaxRSSMiB)
			}
		}
		if c > 0 && a > 0 {
			cat, art, ratio = append(cat, c), append(art, a), append(ratio, a/c)
		}
	}
	fmt.Fprintf(w, "Item 2, the DLQ artifact of 1,000,000 records (bench/dlq -n 1000000 -only artifact; %d runs, load %s):\n\n", len(ratio), loads.of(names))
	fmt.Fprintln(w, "| cat of the records, s | artifact build + upload, s | ratio (target ≤ 1.5) | peak RSS MiB (target ≤ 64) |")
	fmt.Fprintln(w, "| ---: | ---: | ---: | ---: |")
	fmt.Fprintf(w, "| %s | %s | %s: %s | %s: %s |\n", of(cat).f(1), of(art).f(1), of(ratio).f(2), met(of(ratio).med, 1.5), of(rss).f(1), met(of(rss).hi, 64))
	return nil
}

// engineReport is what bench/engine -json prints (the fields used here).
type engineReport struct {
	CPUStrongOverEngine float64 `json:"cpu_speedup_vs_strong_baseline"`
	Split               []struct {
		Kind string `json:"kind"`
		Git  []struct {
			Command string  `json:"command"`
			CPUMS   float64 `json:"cpu_ms_per_item"`
		} `json:"git"`
	} `json:"cpu_split"`
	Yardstick *struct {
		Own         float64 `json:"engine_own_cpu_ms_per_item"`
		Before      float64 `json:"floor_before_cpu_ms_per_item"`
		After       float64 `json:"floor_after_cpu_ms_per_item"`
		Floor       float64 `json:"floor_cpu_ms_per_item"`
		Ratio       float64 `json:"ratio"`
		RatioBefore float64 `json:"ratio_before"`
		StrongRatio float64 `json:"strong_ratio"`
	} `json:"yardstick"`
}

// yardstickSection is item 3: the engine's own CPU against the floor of
// its strategy, on the disk and on tmpfs, at 1,000 and 10,000 files.
func yardstickSection(w io.Writer, dir string, loads loadLog) error {
	fmt.Fprintln(w, "Item 3, the yardstick (bench/engine -n 300 -max-parallel 2 -split -checkout; engine's own CPU = the CLI + the git it starts):")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| files | file system | runs | load | engine's own CPU ms/item | floor before / after the runs | ratio to their mean (target ≤ 1.5) | the strong script's own, same floor | engine / strong CPU (target ≤ 1.0 at 10,000) |")
	fmt.Fprintln(w, "| ---: | --- | ---: | --- | ---: | ---: | ---: | ---: | ---: |")
	for _, c := range []struct{ name, files, fs string }{{"1k-disk", "1,000", "disk"}, {"1k-tmpfs", "1,000", "tmpfs"}, {"10k-disk", "10,000", "disk"}, {"10k-tmpfs", "10,000", "tmpfs"}} {
		rs, names := runs[engineReport](w, dir, "y-"+c.name)
		var own, before, after, ratio, strongRatio, strong []float64
		for _, r := range rs {
			if y := r.Yardstick; y != nil {
				own, before, after, ratio = append(own, y.Own), append(before, y.Before), append(after, y.After), append(ratio, y.Ratio)
				if sr := r.strongRatio(); sr > 0 {
					strongRatio = append(strongRatio, sr)
				}
			}
			if r.CPUStrongOverEngine > 0 {
				strong = append(strong, 1/r.CPUStrongOverEngine)
			}
		}
		if len(ratio) == 0 {
			fmt.Fprintf(w, "| %s | %s | 0 | | | | | | |\n", c.files, c.fs)
			continue
		}
		vs := ""
		if len(strong) > 0 {
			vs = of(strong).f(2)
			if c.files == "10,000" {
				vs += ": " + met(of(strong).med, 1.0)
			}
		}
		sr := ""
		if len(strongRatio) > 0 {
			sr = of(strongRatio).f(2)
		}
		fmt.Fprintf(w, "| %s | %s | %d | %s | %s | %.1f / %.1f | %s: %s | %s | %s |\n", c.files, c.fs, len(ratio), loads.of(names),
			of(own).f(1), of(before).med, of(after).med, of(ratio).f(2), met(of(ratio).med, 1.5), sr, vs)
	}
	return nil
}

// shardsReport is what bench/shards -json prints (the fields used here).
type shardsReport struct {
	GatherS  float64 `json:"gather_s"`
	FetchS   float64 `json:"gather_fetch_verify_s"`
	MergeS   float64 `json:"gather_merge_import_s"`
	RegathS  float64 `json:"second_gather_s"`
	Accounts bool    `json:"every_item_accounted_once"`
}

// gatherSection is item 4: 50 shards of 200 items gathered against one
// shard's gather plus the merges.
func gatherSection(w io.Writer, dir string, loads loadLog) error {
	one, n1 := runs[shardsReport](w, dir, "sh-1x200")
	fifty, n50 := runs[shardsReport](w, dir, "sh-50x200")
	if len(one) == 0 || len(fifty) == 0 {
		return none(w, "Item 4 (gather)")
	}
	oneGather := of(collect(one, func(r shardsReport) float64 { return r.GatherS }))
	var ratio []float64
	ok := true
	for _, r := range append(one, fifty...) {
		ok = ok && r.Accounts
	}
	for _, r := range fifty {
		if r.MergeS > 0 {
			ratio = append(ratio, r.GatherS/(2*(oneGather.med+r.MergeS)))
		}
	}
	fmt.Fprintf(w, "Item 4, gather (bench/shards; %d runs of 1 × 200 and %d of 50 × 200, load %s):\n\n", len(one), len(fifty), loads.of(append(n1, n50...)))
	fmt.Fprintln(w, "| shards × items | gather s | fetch + verify s | merge + import s |")
	fmt.Fprintln(w, "| --- | ---: | ---: | ---: |")
	fmt.Fprintf(w, "| 1 × 200 | %s | %s | %s |\n", oneGather.f(3),
		of(collect(one, func(r shardsReport) float64 { return r.FetchS })).f(3), of(collect(one, func(r shardsReport) float64 { return r.MergeS })).f(3))
	fmt.Fprintf(w, "| 50 × 200 | %s | %s | %s |\n", of(collect(fifty, func(r shardsReport) float64 { return r.GatherS })).f(2),
		of(collect(fifty, func(r shardsReport) float64 { return r.FetchS })).f(2), of(collect(fifty, func(r shardsReport) float64 { return r.MergeS })).f(2))
	fmt.Fprintf(w, "\n50 × 200 gathered in %s× of 2 × (one shard's gather, median %.3f s, + that run's merges) (target ≤ 1.0: %s). Every item accounted for once in every run: %v.\n",
		of(ratio).f(2), oneGather.med, met(of(ratio).med, 1.0), ok)
	return nil
}

// thousands writes n with commas: 100000 → "100,000".
func thousands(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// strongRatio is the strong script's own CPU over the yardstick's floor:
// as bench/engine reports it, or, from a report written before it did,
// computed the same way from the strong script's split (its git but the
// agents' add and commit); 0 when the strong script did not run.
func (r engineReport) strongRatio() float64 {
	y := r.Yardstick
	if y == nil || y.Floor <= 0 {
		return 0
	}
	if y.StrongRatio > 0 {
		return y.StrongRatio
	}
	for _, s := range r.Split {
		if s.Kind != "strong" {
			continue
		}
		var own float64
		for _, g := range s.Git {
			if g.Command != "script add" && g.Command != "script commit" {
				own += g.CPUMS
			}
		}
		return own / y.Floor
	}
	return 0
}
