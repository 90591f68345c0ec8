package main

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
)

// sizeRow is one point of the repository-size sweep (-sweep-files): the
// strong baseline and the engine at (files, N, max_parallel), each run
// -repeat times, alternating, with medians and ratios of medians.
type sizeRow struct {
	Files       int     `json:"files"`
	SizeMB      float64 `json:"size_mb"`
	N           int     `json:"n"`
	MaxParallel int     `json:"max_parallel"`
	// Strong and Engine are every run, in order.
	Strong []measurement `json:"strong_runs"`
	Engine []measurement `json:"engine_runs"`
	// Medians of wall seconds and CPU seconds.
	StrongWallS float64 `json:"strong_wall_s"`
	StrongCPUS  float64 `json:"strong_cpu_s"`
	EngineWallS float64 `json:"engine_wall_s"`
	EngineCPUS  float64 `json:"engine_cpu_s"`
	EngineSelfS float64 `json:"engine_self_cpu_s"`
	// EngineMergeMS is the median of the engine runs' mean per-item merge
	// time (timings_ms.merge: listing the agent's commits, waiting for the
	// merge lock, the merge): the "merge section per item", which
	// must not grow with N.
	EngineMergeMS float64 `json:"engine_merge_ms_per_item"`
	// WallRatio and CPURatio are engine/strong medians (below 1: the
	// engine is cheaper; the targets are ≤ 0.8 and ≤ 0.7).
	WallRatio float64 `json:"engine_vs_strong_wall"`
	CPURatio  float64 `json:"engine_vs_strong_cpu"`
	// Split is the CPU split of one extra run per kind at this repository
	// size's first N (-split), with git processes per item.
	Split []cpuSplit `json:"cpu_split,omitempty"`
}

// sizeSweep runs the repository-size sweep: for every -sweep-files size a
// template of that many files (the main configuration's bytes per file),
// then for every -sweep-n N the strong baseline and the engine at
// -max-parallel, -repeat times each.
func (b *bench) sizeSweep(ctx context.Context) ([]sizeRow, error) {
	var rows []sizeRow
	mainTemplate := b.template
	defer func() { b.template = mainTemplate }()
	for _, files := range b.cfg.SweepFiles {
		sizeMB := b.cfg.SizeMB * float64(files) / float64(b.cfg.Files)
		b.template = filepath.Join(b.work, fmt.Sprintf("template-%d.git", files))
		fmt.Fprintf(b.log, "size sweep: a repository of %d files, %.1f MiB\n", files, sizeMB)
		if _, err := makeTemplate(ctx, b.template, files, sizeMB, b.cfg.Seed); err != nil {
			return nil, err
		}
		for i, n := range b.cfg.SweepN {
			row := sizeRow{Files: files, SizeMB: round2(sizeMB), N: n, MaxParallel: b.cfg.MaxParallel}
			for range b.cfg.Repeat {
				for _, kind := range []string{kindStrong, kindEngine} {
					m, err := b.measure(ctx, kind, n, b.cfg.MaxParallel)
					if err != nil {
						return nil, err
					}
					if kind == kindStrong {
						row.Strong = append(row.Strong, m)
					} else {
						row.Engine = append(row.Engine, m)
					}
				}
				if err := verifySame([]measurement{row.Strong[len(row.Strong)-1], row.Engine[len(row.Engine)-1]}); err != nil {
					return nil, err
				}
			}
			row.StrongWallS = median(row.Strong, func(m measurement) float64 { return m.WallMS / 1000 })
			row.StrongCPUS = median(row.Strong, func(m measurement) float64 { return m.CPUSeconds })
			row.EngineWallS = median(row.Engine, func(m measurement) float64 { return m.WallMS / 1000 })
			row.EngineCPUS = median(row.Engine, func(m measurement) float64 { return m.CPUSeconds })
			row.EngineSelfS = median(row.Engine, func(m measurement) float64 { return m.SelfCPUSeconds })
			row.EngineMergeMS = median(row.Engine, func(m measurement) float64 {
				if m.TimingsMS == nil {
					return 0
				}
				return m.TimingsMS.Merge
			})
			row.WallRatio = round2(row.EngineWallS / row.StrongWallS)
			row.CPURatio = round2(row.EngineCPUS / row.StrongCPUS)
			if b.cfg.Split && i == 0 {
				for _, kind := range []string{kindStrong, kindEngine} {
					s, err := b.split(ctx, kind, n, b.cfg.MaxParallel)
					if err != nil {
						return nil, err
					}
					row.Split = append(row.Split, s)
				}
			}
			fmt.Fprintf(b.log, "size sweep: %d files, N=%d: engine/strong wall %.2f, CPU %.2f (medians of %d)\n",
				files, n, row.WallRatio, row.CPURatio, b.cfg.Repeat)
			rows = append(rows, row)
		}
	}
	return rows, nil
}

// median returns the median of f over ms (the mean of the middle two for
// an even count), rounded to milliseconds.
func median(ms []measurement, f func(measurement) float64) float64 {
	v := make([]float64, len(ms))
	for i, m := range ms {
		v[i] = f(m)
	}
	slices.Sort(v)
	if len(v) == 0 {
		return 0
	}
	mid := len(v) / 2
	if len(v)%2 == 1 {
		return round3(v[mid])
	}
	return round3((v[mid-1] + v[mid]) / 2)
}
