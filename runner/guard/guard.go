package guard

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/prodigy-action/prodigy-action/gitops"
	"github.com/prodigy-action/prodigy-action/internal/brief"
	"github.com/prodigy-action/prodigy-action/jobstore"
)

// ErrIntegrity marks the failures Check finds.
var ErrIntegrity = errors.New("results cannot be published")

// Guard is one job's integrity check (see the package comment): what it
// needs of the job, given when the job opens, and what it found. Its
// methods are called by the engine's one goroutine that runs the job's
// phases, not concurrently.
type Guard struct {
	Git       *gitops.Client
	State     *jobstore.State
	JobID     string
	Branch    string // the results branch
	ParentDir string // the job's parent worktree
	// Warn reports what the check could not do (it then checks less).
	Warn func(string)
	// Unmerge returns a merged item whose merge is not on the results
	// branch as the engine left it to pending, saying why; an error is
	// the checkpoint write's, passed to Persisted.
	Unmerge   func(row *jobstore.CheckpointItem, why string) error
	Persisted func(what string, err error)

	// baseline is the repository's risky git configuration before any
	// agent of this execution ran; audited says it was read.
	baseline []gitops.ConfigFinding
	audited  bool
	// failed is the integrity failure found, if any.
	failed error
}

// auditDirs are the worktrees besides the user's checkout whose own git
// configuration the engine's git reads: the parent worktree (merges,
// reduce), when it has files.
func (g *Guard) auditDirs() []string {
	if _, err := os.Stat(filepath.Join(g.ParentDir, ".git")); err != nil {
		return nil
	}
	return []string{g.ParentDir}
}

// NeedsVerifiedTip reports whether this execution starts from a tip no
// agent has touched yet: nothing verified so far and no item merged (a
// shard's first run, setup done by the plan).
func (g *Guard) NeedsVerifiedTip() bool {
	need := true
	g.State.ReadHead(func(h *jobstore.CheckpointHead) { need = h.ResultsVerified == "" })
	if need {
		_ = g.State.Scan(func(_ int, it *jobstore.CheckpointItem) bool {
			need = it.State != jobstore.ItemMerged
			return need
		})
	}
	return need
}

// AuditBaseline reads the repository's risky configuration before agents
// of this execution run. A read failure is a warning: the next Check then
// skips the configuration.
func (g *Guard) AuditBaseline(ctx context.Context) {
	f, err := g.Git.AuditConfig(ctx, g.auditDirs()...)
	if err != nil {
		g.Warn(fmt.Sprintf("could not read the repository's git configuration (%v); changes agents make to it will not be detected", err))
		g.audited = false
		return
	}
	g.baseline, g.audited = f, true
}

// MarkVerified records tip, the results branch's current tip, as
// verified: the engine itself produced it outside the map phase (setup,
// reduce), a completed earlier run ended there, or no agent has run on it
// yet. The error is the checkpoint write's.
func (g *Guard) MarkVerified(tip string) error {
	return g.State.UpdateHead(func(h *jobstore.CheckpointHead) { h.ResultsVerified = tip })
}

// Check verifies the results branch and the configuration once the agents
// are done (before reduce, at the end). It returns the verified tip ("" when
// nothing was recorded to verify against: a job of an older version), or
// an error wrapping ErrIntegrity that says what changed and what to do;
// fresh reports that this call found it. A failure is remembered: later
// calls return it again, not fresh.
func (g *Guard) Check(ctx context.Context) (tip string, fresh bool, err error) {
	if g.failed != nil {
		return "", false, g.failed
	}
	var problems []string
	tip, reset, err := g.verifyResults(ctx)
	if err != nil {
		problems = append(problems, err.Error())
	}
	if g.audited {
		now, aerr := g.Git.AuditConfig(ctx, g.auditDirs()...)
		switch {
		case aerr != nil:
			problems = append(problems, fmt.Sprintf("the repository's git configuration could not be read again: %v", aerr))
		default:
			if added := gitops.AddedConfig(g.baseline, now); len(added) > 0 {
				var s []string
				for _, f := range added {
					s = append(s, f.String())
				}
				s = brief.FirstN(s, 10)
				problems = append(problems, fmt.Sprintf("the repository's git configuration gained %d risky entr(ies) while agents ran: %s (remove them before publishing)", len(added), strings.Join(s, "; ")))
			}
		}
	}
	if len(problems) == 0 {
		return tip, false, nil
	}
	msg := strings.Join(problems, "; ")
	if len(reset) > 0 {
		msg += fmt.Sprintf("; %d item(s) whose merge is not verified are pending again (%s)", len(reset), strings.Join(brief.FirstN(reset, 10), ", "))
	}
	g.failed = fmt.Errorf("%w: %s", ErrIntegrity, msg)
	return "", true, g.failed
}

// verifyResults checks the results branch against what the engine wrote
// (see the package comment). On a mismatch it returns why, and the ids of
// the merged items it put back to pending.
func (g *Guard) verifyResults(ctx context.Context) (tip string, reset []string, err error) {
	ref := "refs/heads/" + g.Branch
	var base, verified string
	merges := map[string][]mergedItem{}
	g.State.ReadHead(func(h *jobstore.CheckpointHead) { base, verified = h.BaseCommit, h.ResultsVerified })
	if serr := g.State.Scan(func(pos int, it *jobstore.CheckpointItem) bool {
		if it.State == jobstore.ItemMerged && it.MergeCommit != "" {
			merges[it.MergeCommit] = append(merges[it.MergeCommit], mergedItem{pos: pos, id: it.ItemID})
		}
		return true
	}); serr != nil {
		return "", nil, fmt.Errorf("read the job's merged items: %w", serr)
	}
	if verified == "" && len(merges) == 0 {
		return "", nil, nil // nothing recorded to verify against (a job of an older version)
	}
	tip, rerr := g.Git.ResolveRef(ctx, ref)
	if rerr != nil {
		err = fmt.Errorf("the results branch %s is gone (deleted outside the engine?): %w", g.Branch, rerr)
		reset = g.resetUnverified(nil, merges)
		sort.Strings(reset)
		return "", reset, err
	}
	limit := len(merges) + 100000
	chain, lerr := g.Git.FirstParentLog(ctx, tip, base, limit)
	if lerr != nil {
		return "", nil, fmt.Errorf("read the results branch %s: %w", g.Branch, lerr)
	}
	pos := make(map[string]int, len(chain)+1)
	for i, c := range chain {
		pos[c.ID] = i
	}
	pos[base] = len(chain)
	reachedBase := len(chain) == 0 || (len(chain[len(chain)-1].Parents) > 0 && chain[len(chain)-1].Parents[0] == base)
	var problems []string
	if !reachedBase {
		problems = append(problems, fmt.Sprintf("its history no longer starts from the job's base commit %s", brief.SHA(base)))
	}
	vpos, onChain := pos[verified]
	if verified != "" && !onChain {
		problems = append(problems, fmt.Sprintf("the tip the engine last verified (%s) is no longer on it: it was rewound or rewritten", brief.SHA(verified)))
		vpos = -1
	}
	if verified == "" {
		vpos = 0 // a job of an older version: no segment to check
	}
	var unknown []string
	for _, c := range chain[:max(vpos, 0)] {
		if _, ok := merges[c.ID]; !ok {
			unknown = append(unknown, brief.SHA(c.ID))
		}
	}
	if len(unknown) > 0 {
		problems = append(problems, fmt.Sprintf("it holds %d commit(s) the engine did not make (%s)", len(unknown), strings.Join(brief.FirstN(unknown, 5), ", ")))
	}
	var missing []string
	for mc, its := range merges {
		if _, ok := pos[mc]; !ok {
			for _, it := range its {
				missing = append(missing, it.id)
			}
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		problems = append(problems, fmt.Sprintf("the merges of %d item(s) reported merged are not on it (%s)", len(missing), strings.Join(brief.FirstN(missing, 10), ", ")))
	}
	if len(problems) == 0 {
		return tip, nil, nil
	}
	keep := map[string]bool{}
	rewritten := !reachedBase || vpos < 0 || len(unknown) > 0
	for id, p := range pos {
		// Merges still on the branch stay merged, unless what is above
		// the verified tip can no longer be trusted: then only what is at
		// or below it does.
		if !rewritten || p >= vpos {
			keep[id] = true
		}
	}
	reset = g.resetUnverified(keep, merges)
	sort.Strings(reset)
	move := "`resume " + g.JobID + "` redoes the items whose merge is missing"
	if rewritten {
		move = "inspect it"
		if verified != "" && vpos >= 0 {
			move += fmt.Sprintf(", move it back with `git update-ref refs/heads/%s %s`", g.Branch, verified)
		}
		move += " and `resume " + g.JobID + "`"
	}
	err = fmt.Errorf("the results branch %s was changed outside the engine (now at %s): %s; refusing to publish it — %s",
		g.Branch, brief.SHA(tip), strings.Join(problems, "; "), move)
	return "", reset, err
}

// mergedItem is an item the checkpoint says merged: its position and id.
type mergedItem struct {
	pos int
	id  string
}

// resetUnverified puts every merged item whose merge commit is not in keep
// back to pending (its work is redone by a resume) and returns their ids.
func (g *Guard) resetUnverified(keep map[string]bool, merges map[string][]mergedItem) []string {
	var ids []string
	for mc, its := range merges {
		if keep[mc] {
			continue
		}
		for _, m := range its {
			ids = append(ids, m.id)
			row, err := g.State.Hold(m.pos)
			if err == nil {
				err = g.Unmerge(row, "its merge is not on the results branch as the engine left it")
				g.State.Release(row)
			}
			g.Persisted("item "+m.id+" not merged after all", err)
		}
	}
	return ids
}
