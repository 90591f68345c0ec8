package main

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prodigy-action/prodigy-action/gitops"
)

// checkoutCost is the per-worktree cost of the engine's own git operations
// on one clone of the template (issue 14: cheap setup, sparse agents, reset
// proportional to what changed), measured with gitops directly.
type checkoutCost struct {
	// FullCheckoutMS is one `git worktree add --detach` of the whole tree:
	// the yardstick of time_to_first_agent.
	FullCheckoutMS float64 `json:"full_checkout_ms"`
	// FullCheckoutAfterMS is the same checkout again, right after the
	// engine run: file creation on a shared machine drifts, so the ratio
	// is taken against the mean of the two (YardstickMS).
	FullCheckoutAfterMS float64 `json:"full_checkout_after_ms,omitempty"`
	YardstickMS         float64 `json:"yardstick_ms,omitempty"`
	// FullDiskKB and SparseDiskKB are the disk use (allocated blocks) of
	// one full and one sparse worktree, .git file included.
	FullDiskKB   int64 `json:"full_disk_kb"`
	SparseDiskKB int64 `json:"sparse_disk_kb,omitempty"`
	// SparseCheckoutMS is one gitops.WorktreeCreate with the -sparse dirs.
	SparseCheckoutMS float64 `json:"sparse_checkout_ms,omitempty"`
	// FullResetMS and SparseResetMS are the mean per-item reset of a pool
	// slot after an agent-like commit: `git clean -ffdx`, then `git
	// checkout --force -B` of a new branch at the base, the git a pool
	// strategy runs between items (the engine itself cleans in-process).
	FullResetMS   float64 `json:"full_reset_ms"`
	SparseResetMS float64 `json:"sparse_reset_ms,omitempty"`
	// FullCheckoutCPUMS and FullResetCPUMS are the CPU time of the git
	// processes of that full checkout and of one per-item reset (mean):
	// the process floor of the engine's pool strategy (yardstick).
	FullCheckoutCPUMS float64 `json:"full_checkout_cpu_ms"`
	FullResetCPUMS    float64 `json:"full_reset_cpu_ms"`
	// SparseDiskRatio is SparseDiskKB / FullDiskKB.
	SparseDiskRatio float64  `json:"sparse_disk_ratio,omitempty"`
	Sparse          []string `json:"sparse,omitempty"`
	Resets          int      `json:"resets"`
}

// resetRounds is how many per-item resets are averaged: 100, as 30 (until
// round 3, session 10) left a floor that moved by 2–3× between two
// measurements minutes apart on a shared VM.
const resetRounds = 100

// measureCheckout clones the template and measures checkoutCost.
func (b *bench) measureCheckout(ctx context.Context) (*checkoutCost, error) {
	dir := filepath.Join(b.work, "runs", "checkout-cost")
	repo := filepath.Join(dir, "repo")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	defer b.done(dir)
	if err := cloneRepo(ctx, b.template, repo); err != nil {
		return nil, err
	}
	c, err := gitops.New(repo, gitops.Options{})
	if err != nil {
		return nil, err
	}
	head, err := gitOut(ctx, repo, nil, "rev-parse", "HEAD")
	if err != nil {
		return nil, err
	}
	cc := &checkoutCost{Sparse: b.sparseDirs(), Resets: resetRounds}
	f, err := b.measureFloor(ctx, c, repo, dir, head)
	if err != nil {
		return nil, err
	}
	cc.FullCheckoutMS, cc.FullCheckoutCPUMS = f.CheckoutMS, f.CheckoutCPUMS
	cc.FullResetMS, cc.FullResetCPUMS = f.ResetMS, f.ResetCPUMS
	full := filepath.Join(dir, "full")
	if cc.FullDiskKB, err = diskKB(full); err != nil {
		return nil, err
	}
	fmt.Fprintf(b.log, "checkout: full %.0f ms, %s\n", cc.FullCheckoutMS, mib(cc.FullDiskKB))
	fmt.Fprintf(b.log, "checkout: full per-item reset %.1f ms (%.1f ms CPU)\n", cc.FullResetMS, cc.FullResetCPUMS)
	if err := c.WorktreeDiscard(ctx, full); err != nil {
		return nil, err
	}
	if len(cc.Sparse) == 0 {
		return cc, nil
	}
	sparse := filepath.Join(dir, "sparse")
	start := time.Now()
	if err := c.WorktreeCreate(ctx, sparse, "", head, gitops.CheckoutOptions{Sparse: cc.Sparse, UntrackedCache: true}); err != nil {
		return nil, err
	}
	cc.SparseCheckoutMS = ms(time.Since(start))
	if cc.SparseDiskKB, err = diskKB(sparse); err != nil {
		return nil, err
	}
	cc.SparseDiskRatio = round3(float64(cc.SparseDiskKB) / float64(cc.FullDiskKB))
	if cc.SparseResetMS, _, err = resetCost(ctx, sparse, "sparse"); err != nil {
		return nil, err
	}
	fmt.Fprintf(b.log, "checkout: sparse %v %.0f ms, %s (%.3f of full), per-item reset %.1f ms\n",
		cc.Sparse, cc.SparseCheckoutMS, mib(cc.SparseDiskKB), cc.SparseDiskRatio, cc.SparseResetMS)
	return cc, c.WorktreeDiscard(ctx, sparse)
}

// fullCheckoutAgain times one more full `git worktree add --detach` on a
// fresh clone of the template (the yardstick, after the engine run).
func (b *bench) fullCheckoutAgain(ctx context.Context) (float64, error) {
	dir := filepath.Join(b.work, "runs", "checkout-after")
	repo := filepath.Join(dir, "repo")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, err
	}
	defer b.done(dir)
	if err := cloneRepo(ctx, b.template, repo); err != nil {
		return 0, err
	}
	start := time.Now()
	if err := gitRun(ctx, repo, nil, "worktree", "add", "-q", "--detach", filepath.Join(dir, "full"), "HEAD"); err != nil {
		return 0, err
	}
	d := ms(time.Since(start))
	fmt.Fprintf(b.log, "checkout: full again after the engine run %.0f ms\n", d)
	return d, nil
}

// floorCost is one measurement of the process floor of the engine's pool
// strategy on the clone at repo (its commit head): one full `git worktree
// add --detach` (left at dir/full for the caller) and the mean per-item
// reset of a slot made as the engine makes pool slots (gitops.WorktreeCreate
// with the untracked cache), wall and CPU of their git processes.
type floorCost struct {
	CheckoutMS    float64 `json:"checkout_ms"`
	CheckoutCPUMS float64 `json:"checkout_cpu_ms"`
	ResetMS       float64 `json:"reset_ms"`
	ResetCPUMS    float64 `json:"reset_cpu_ms"`
}

// perItem is the floor per item for n items on p slots: one reset each
// plus the p checkouts amortised.
func (f floorCost) perItem(p, n int) float64 {
	return f.ResetCPUMS + f.CheckoutCPUMS*float64(p)/float64(max(n, 1))
}

func (b *bench) measureFloor(ctx context.Context, c *gitops.Client, repo, dir, head string) (floorCost, error) {
	var f floorCost
	full := filepath.Join(dir, "full")
	start, cpu0 := time.Now(), cpuUsed()
	if err := gitRun(ctx, repo, nil, "worktree", "add", "-q", "--detach", full, head); err != nil {
		return f, err
	}
	f.CheckoutMS = ms(time.Since(start))
	f.CheckoutCPUMS = round2(ms(cpuUsed() - cpu0))
	slot := filepath.Join(dir, "slot")
	if err := c.WorktreeCreate(ctx, slot, "", head, gitops.CheckoutOptions{UntrackedCache: true}); err != nil {
		return f, err
	}
	var err error
	if f.ResetMS, f.ResetCPUMS, err = resetCost(ctx, slot, "full"); err != nil {
		return f, err
	}
	return f, c.WorktreeDiscard(ctx, slot)
}

// floorAgain measures the full floor once more on a fresh clone of the
// template, after the runs: the cost of creating files on a disk drifts
// within a run (on this VM's ext4 a full checkout took 0.7 s of CPU before
// a run and 2.5 s after it), so the yardstick takes the mean of the two.
func (b *bench) floorAgain(ctx context.Context) (floorCost, error) {
	dir := filepath.Join(b.work, "runs", "floor-after")
	repo := filepath.Join(dir, "repo")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return floorCost{}, err
	}
	defer b.done(dir)
	if err := cloneRepo(ctx, b.template, repo); err != nil {
		return floorCost{}, err
	}
	c, err := gitops.New(repo, gitops.Options{})
	if err != nil {
		return floorCost{}, err
	}
	head, err := gitOut(ctx, repo, nil, "rev-parse", "HEAD")
	if err != nil {
		return floorCost{}, err
	}
	f, err := b.measureFloor(ctx, c, repo, dir, head)
	if err != nil {
		return f, err
	}
	return f, c.WorktreeDiscard(ctx, filepath.Join(dir, "full"))
}

// resetCost runs resetRounds agent-like items in the worktree dir — write
// out/item-N.txt, commit — each followed by a pool slot's per-item reset
// in git (`clean -ffdx`, then `checkout --force -B` of a new branch at the
// base), and returns the mean reset time and the CPU time of its git
// processes, in ms.
func resetCost(ctx context.Context, dir, tag string) (wallMS, cpuMS float64, err error) {
	base, err := gitOut(ctx, dir, nil, "rev-parse", "HEAD")
	if err != nil {
		return 0, 0, err
	}
	var total, cpu time.Duration
	// Round 0 is not counted: right after a checkout every file is as new
	// as the index ("racily clean"), so git re-reads them all once; the
	// engine's slots pay that once per job, not per item.
	for i := 0; i <= resetRounds; i++ {
		if err := os.MkdirAll(filepath.Join(dir, "out"), 0o755); err != nil {
			return 0, 0, err
		}
		if err := os.WriteFile(filepath.Join(dir, itemPath(i)), []byte(itemContent(i)), 0o644); err != nil {
			return 0, 0, err
		}
		if err := gitRun(ctx, dir, nil, "add", "--sparse", itemPath(i)); err != nil {
			return 0, 0, err
		}
		if err := gitRun(ctx, dir, nil, "commit", "-q", "-m", "item"); err != nil {
			return 0, 0, err
		}
		// An untracked leftover, as agents leave.
		if err := os.WriteFile(filepath.Join(dir, "scratch.tmp"), []byte("x"), 0o644); err != nil {
			return 0, 0, err
		}
		// git's own clean and checkout, not the engine's gitops (which
		// cleans in-process since round 3, session 11): the floor is what
		// the strategy costs in git, whatever the engine does instead.
		start, cpu0 := time.Now(), cpuUsed()
		if err := gitRun(ctx, dir, nil, "clean", "-ffdxq"); err != nil {
			return 0, 0, err
		}
		if err := gitRun(ctx, dir, nil, "checkout", "--quiet", "--force", "--no-track", "-B", fmt.Sprintf("bench-%s-%d", tag, i), base, "--"); err != nil {
			return 0, 0, err
		}
		if i > 0 {
			total += time.Since(start)
			cpu += cpuUsed() - cpu0
		}
	}
	return round2(ms(total) / resetRounds), round2(ms(cpu) / resetRounds), nil
}

// diskKB is the allocated size of the files under dir, in KiB.
func diskKB(dir string) (int64, error) {
	var blocks int64
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			blocks += st.Blocks
		}
		return nil
	})
	return blocks / 2, err
}

// firstAgentMS reads the step-start times the engine's agents appended to
// path (see stepStartLine) and returns the time from start to the
// earliest, in ms.
func firstAgentMS(path string, start time.Time) (float64, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("no agent step start recorded: %w", err)
	}
	var first float64
	for _, f := range strings.Fields(string(data)) {
		v, err := strconv.ParseFloat(f, 64)
		if err != nil {
			return 0, fmt.Errorf("bad step start %q in %s", f, path)
		}
		if first == 0 || v < first {
			first = v
		}
	}
	if first == 0 {
		return 0, fmt.Errorf("no agent step start recorded in %s", path)
	}
	startS := float64(start.UnixMicro()) / 1e6
	return round2((first - startS) * 1000), nil
}

// sparseDirs is the engine's --sparse list: the -sparse dirs plus out/,
// where the agents write (a sparse checkout cannot add files outside its
// cone without `git add --sparse`).
func (b *bench) sparseDirs() []string {
	if len(b.cfg.Sparse) == 0 {
		return nil
	}
	dirs := append([]string(nil), b.cfg.Sparse...)
	for _, d := range dirs {
		if strings.TrimSuffix(d, "/") == "out" {
			return dirs
		}
	}
	return append(dirs, "out")
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// firstCheckoutMS reads the trace2 event file of an engine run and returns
// the lifetime, in ms, of the first `git reset --quiet --hard HEAD` — the
// engine's checkout of its first pool slot (gitops.WorktreePopulate): one
// full checkout, taken in the same run, so time_to_first_agent can be set
// against it without the drift between two runs minutes apart.
func firstCheckoutMS(path string) (float64, error) {
	first, found := "", 0.0
	err := eachTraceEvent(path, func(ev traceEvent) bool {
		switch {
		case first == "" && ev.Event == "start" && slices.Equal(tail3(ev.Argv), []string{"--hard", "HEAD", "--"}) && slices.Contains(ev.Argv, "reset"):
			first = ev.SID
		case first != "" && ev.SID == first && ev.Event == "atexit":
			found = round2(ev.TAbs * 1000)
			return false
		}
		return true
	})
	if err != nil {
		return 0, err
	}
	if found == 0 {
		return 0, fmt.Errorf("no pool slot checkout (reset --hard HEAD) in %s", path)
	}
	return found, nil
}

// tail3 returns the last three elements of s (all of it if shorter).
func tail3(s []string) []string { return s[max(0, len(s)-3):] }
