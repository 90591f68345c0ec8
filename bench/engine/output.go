package main

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
)

// writeJSON prints the report as one indented JSON object.
func writeJSON(w io.Writer, rep *report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(rep); err != nil {
		return fmt.Errorf("failed to write JSON: %w", err)
	}
	return nil
}

// writeText prints the report as human-readable tables.
func writeText(w io.Writer, rep *report) error {
	fmt.Fprintf(w, "bench/engine: %d files, %.1f MiB in %d dirs; N=%d items, max_parallel=%d; git %s; %d CPUs\n\n",
		rep.Repo.Files, float64(rep.Repo.Bytes)/(1<<20), rep.Repo.Dirs, rep.N, rep.MaxParallel, rep.GitVersion, rep.CPUs)
	if len(rep.Sizes) > 0 {
		return writeSizes(w, rep)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "run\twall s\tCPU s (self+children)\titems/s\tms/item\tpeak RSS\tvs baseline\tvs strong\t")
	ratio := func(base, m float64) string {
		if base <= 0 || m <= 0 {
			return "-"
		}
		return fmt.Sprintf("%.2fx", base/m)
	}
	row := func(name string, m measurement) {
		fmt.Fprintf(tw, "%s\t%.2f\t%.2f (%.2f+%.2f)\t%.1f\t%.1f\t%s\t%s\t%s\t\n", name, m.WallMS/1000, m.CPUSeconds, m.SelfCPUSeconds, m.ChildCPUSeconds, m.ItemsPerSec,
			m.WallMS/float64(m.N), mib(m.PeakRSSKB), ratio(rep.Baseline.WallMS, m.WallMS), ratio(rep.Strong.WallMS, m.WallMS))
	}
	if rep.Baseline.WallMS > 0 {
		row("plain git baseline", rep.Baseline)
	}
	if rep.Strong.WallMS > 0 {
		row("strong git baseline", rep.Strong)
	}
	row("engine pool/tree", rep.Engine)
	if rep.Before != nil {
		row("engine fresh/worktree (before)", *rep.Before)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nspeedup_vs_git_baseline: %.2f   speedup_vs_strong_baseline: %.2f (wall), %.2f (CPU)   (identical merged trees: %s)\n",
		rep.Speedup, rep.StrongSpeedup, rep.StrongCPUSpeedup, rep.MergedTree)
	fmt.Fprintln(w, "CPU s = user+sys of the run's process tree (wait4 rusage: the process and every descendant it waited for).")
	fmt.Fprintln(w, "peak RSS = ru_maxrss of the run's process tree: its largest single process, not a sum.")
	if c := rep.Checkout; c != nil {
		fmt.Fprintf(w, "\ncheckout cost: one full checkout %.0f ms, %s on disk; per-item reset %.1f ms (mean of %d)\n",
			c.FullCheckoutMS, mib(c.FullDiskKB), c.FullResetMS, c.Resets)
		if len(c.Sparse) > 0 {
			fmt.Fprintf(w, "sparse %v: checkout %.0f ms, %s on disk (%.1f%% of full); per-item reset %.1f ms\n",
				c.Sparse, c.SparseCheckoutMS, mib(c.SparseDiskKB), 100*c.SparseDiskRatio, c.SparseResetMS)
		}
		fmt.Fprintf(w, "engine time to first agent: %.0f ms = %.2fx one full checkout (%.0f ms before the engine run, %.0f ms after, mean %.0f ms)\n",
			rep.Engine.FirstAgentMS, rep.FirstAgentRatio, c.FullCheckoutMS, c.FullCheckoutAfterMS, c.YardstickMS)
		if rep.Engine.FirstCheckoutMS > 0 {
			fmt.Fprintf(w, "  = %.2fx the engine's own first slot checkout in the same run (%.0f ms)\n",
				rep.Engine.FirstAgentVsOwnCheckout, rep.Engine.FirstCheckoutMS)
		}
	}
	if e := rep.Engine; e.ResultMS > 0 {
		fmt.Fprintf(w, "engine printed its result after %.0f ms and exited after %.0f ms (%.0f ms of teardown after the result)\n",
			e.ResultMS, e.WallMS, e.WallMS-e.ResultMS)
	}
	if t := rep.EngineItemMS; t != nil {
		total := t.Prepare + t.Steps + t.Merge + t.Cleanup + t.Bookkeeping
		fmt.Fprintf(w, "\nengine mean per-item time (ms, each item's own wall time; merge includes waiting for the merge lock):\n")
		fmt.Fprintf(w, "  prepare %.1f  steps %.1f  merge %.1f  cleanup %.1f  bookkeeping %.1f  = %.1f\n",
			t.Prepare, t.Steps, t.Merge, t.Cleanup, t.Bookkeeping, total)
	}
	if len(rep.Sweep) > 0 {
		fmt.Fprintln(w, "\nsweep (engine pool/tree vs plain git and the strong baseline):")
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "N\tP\tengine s\tengine CPU s\tengine ms/item\tgit s\tstrong s\tstrong CPU s\tvs git\tvs strong\tCPU vs strong\t")
		for _, r := range rep.Sweep {
			fmt.Fprintf(tw, "%d\t%d\t%.2f\t%.2f\t%.1f\t%.2f\t%.2f\t%.2f\t%.2fx\t%.2fx\t%.2fx\t\n", r.N, r.MaxParallel,
				r.Engine.WallMS/1000, r.Engine.CPUSeconds, r.Engine.WallMS/float64(r.N),
				r.Baseline.WallMS/1000, r.Strong.WallMS/1000, r.Strong.CPUSeconds, r.Speedup, r.StrongSpeedup, r.StrongCPUSpeedup)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	for _, s := range rep.Split {
		fmt.Fprintf(w, "\nCPU of %s (N=%d, P=%d, shimmed run: wall %.2f s, CPU %.2f s), ms per item: self %.1f, git %.1f (%.2f processes), other (bash, mkdir, …) %.1f [%.2f bash started], shims %.1f\n",
			s.Kind, s.N, s.MaxParallel, s.WallMS/1000, s.TotalCPUSeconds, s.SelfMSPerItem, s.GitMSPerItem, s.GitProcessesPerItem, s.OtherMSPerItem, s.BashProcessesPerItem, s.ShimMSPerItem)
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "git command\tper item\tCPU ms/item\t")
		for _, c := range s.Git {
			fmt.Fprintf(tw, "%s\t%.2f\t%.2f\t\n", c.Command, c.ProcessesPerItem, c.CPUMSPerItem)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if y := rep.Yardstick; y != nil {
		fmt.Fprintf(w, "\nyardstick (%s): the engine's own CPU (CLI + its git) %.1f ms per item = %.2fx the process floor of its strategy %.1f ms (slot reset + amortised checkouts; the mean of %.1f before the runs and %.1f after them; %.2fx the floor before)\n",
			y.Filesystem, y.EngineOwnCPUMSPerItem, y.Ratio, y.FloorCPUMSPerItem, y.FloorBeforeMSPerItem, y.FloorAfterMSPerItem, y.RatioBefore)
		if y.StrongRatio > 0 {
			fmt.Fprintf(w, "yardstick (%s): the strong script's own CPU (its git but the agents' add and commit) %.1f ms per item = %.2fx the same floor\n", y.Filesystem, y.StrongOwnCPUMSPerItem, y.StrongRatio)
		}
	}
	for _, p := range rep.Profile {
		fmt.Fprintf(w, "\ngit processes of %s (N=%d, P=%d, traced wall %.2f s): %.2f per item (%.2f top-level), %.1f ms of git per item\n",
			p.Kind, p.N, p.MaxParallel, p.WallMS/1000, p.ProcessesPerItem, p.TopLevelPerItem, p.GitMSPerItem)
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "command\tper item\tms/item\t")
		for _, c := range p.Commands {
			fmt.Fprintf(tw, "%s\t%.2f\t%.1f\t\n", c.Hierarchy, c.ProcessesPerItem, c.MSPerItem)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}

// writeSizes prints the repository-size sweep.
func writeSizes(w io.Writer, rep *report) error {
	fmt.Fprintln(w, "size sweep: strong baseline vs engine, medians; ratios are engine/strong (targets: wall ≤ 0.8, CPU ≤ 0.7)")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "files\tN\tP\truns\tstrong wall s\tstrong CPU s\tengine wall s\tengine CPU s\t(engine itself)\tengine merge ms/item\twall ratio\tCPU ratio\tgit/item engine\tgit/item strong\t")
	for _, r := range rep.Sizes {
		gitE, gitS := "-", "-"
		for _, s := range r.Split {
			if s.Kind == kindEngine {
				gitE = fmt.Sprintf("%.2f", s.GitProcessesPerItem)
			} else {
				gitS = fmt.Sprintf("%.2f", s.GitProcessesPerItem)
			}
		}
		fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.1f\t%.2f\t%.2f\t%s\t%s\t\n", r.Files, r.N, r.MaxParallel, len(r.Engine),
			r.StrongWallS, r.StrongCPUS, r.EngineWallS, r.EngineCPUS, r.EngineSelfS, r.EngineMergeMS, r.WallRatio, r.CPURatio, gitE, gitS)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, f := range mergeGrowth(rep.Sizes) {
		fmt.Fprintf(w, "%d files: engine merge section per item at N=%d / N=%d: %.1f / %.1f ms = %.2f× (target ≤ 1.2)\n",
			f.Files, f.MaxN, f.MinN, f.MaxMS, f.MinMS, f.Ratio)
	}
	for _, r := range rep.Sizes {
		for _, s := range r.Split {
			fmt.Fprintf(w, "\n%d files: CPU of %s (N=%d, shimmed run), ms per item: self %.1f, git %.1f (%.2f processes), other %.1f, shims %.1f\n",
				r.Files, s.Kind, s.N, s.SelfMSPerItem, s.GitMSPerItem, s.GitProcessesPerItem, s.OtherMSPerItem, s.ShimMSPerItem)
			for _, c := range s.Git {
				fmt.Fprintf(w, "  %-28s %5.2f/item %8.2f ms/item\n", c.Command, c.ProcessesPerItem, c.CPUMSPerItem)
			}
		}
	}
	return nil
}

// mergeFlatness compares, for one repository size, the engine's merge
// section per item at the sweep's largest N with its smallest.
type mergeFlatness struct {
	Files, MinN, MaxN int
	MinMS, MaxMS      float64
	Ratio             float64
}

// mergeGrowth returns one mergeFlatness per repository size swept at more
// than one N.
func mergeGrowth(rows []sizeRow) []mergeFlatness {
	var out []mergeFlatness
	for i, r := range rows {
		if i > 0 && rows[i-1].Files == r.Files {
			continue
		}
		f := mergeFlatness{Files: r.Files, MinN: r.N, MaxN: r.N, MinMS: r.EngineMergeMS, MaxMS: r.EngineMergeMS}
		for _, o := range rows[i+1:] {
			if o.Files != r.Files {
				break
			}
			if o.N < f.MinN {
				f.MinN, f.MinMS = o.N, o.EngineMergeMS
			}
			if o.N > f.MaxN {
				f.MaxN, f.MaxMS = o.N, o.EngineMergeMS
			}
		}
		if f.MaxN == f.MinN || f.MinMS <= 0 {
			continue
		}
		f.Ratio = round2(f.MaxMS / f.MinMS)
		out = append(out, f)
	}
	return out
}
