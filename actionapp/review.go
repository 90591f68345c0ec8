package actionapp

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/prodigy-action/prodigy-action/ghaction"
	"github.com/prodigy-action/prodigy-action/shard"
)

// errNoApproval: a gather behind a review gate found no approval for it.
var errNoApproval = errors.New("no approved review")

// reviewRejections is the review gate's verdict for a gather: the items
// given in the reject input ("ITEM_ID: reason" or "ITEM_ID=reason" lines)
// and, when review-environment is set, those that approving reviewers of
// that environment rejected in their approval comments ("reject ITEM_ID:
// reason" lines, read from the run's review history). With
// review-environment set the gate fails closed: a run with no approved
// review of that environment (an environment without required reviewers
// lets the job start unreviewed) publishes nothing.
func (r *actionRun) reviewRejections(ctx context.Context) (map[string]string, error) {
	var lines []string
	for _, line := range strings.Split(r.env.gha.GetInput("reject"), "\n") {
		if line = strings.TrimSpace(line); line == "" {
			continue
		}
		if id, why, ok := strings.Cut(line, ":"); ok && !strings.Contains(id, "=") {
			line = strings.TrimSpace(id) + "=" + strings.TrimSpace(why)
		}
		lines = append(lines, line)
	}
	reject, err := shard.ParseRejections(lines)
	if err != nil {
		return nil, fmt.Errorf("input reject: %w", err)
	}
	env := strings.TrimSpace(r.env.gha.GetInput("review-environment"))
	if env == "" {
		return reject, nil
	}
	gh, err := r.github()
	if err != nil {
		return nil, err
	}
	approvals, err := ghaction.ListRunApprovals(ctx, gh, r.owner, r.repo, r.ctx.RunID)
	if err != nil {
		return nil, fmt.Errorf("review-environment %s: %w", env, err)
	}
	approved, rejected := ghaction.ReviewVerdict(approvals, env)
	if !approved {
		return nil, fmt.Errorf("%w: review-environment %s: run %d has no approved review of that environment, so nothing is published; give the environment required reviewers (Settings → Environments → %s → Required reviewers) so this job waits for one",
			errNoApproval, env, r.ctx.RunID, env)
	}
	for _, id := range slices.Sorted(maps.Keys(rejected)) {
		if _, given := reject[id]; !given {
			reject[id] = rejected[id]
		}
	}
	if len(reject) > 0 {
		r.env.gha.Noticef("review: %d item(s) rejected: %s", len(reject), strings.Join(slices.Sorted(maps.Keys(reject)), ", "))
	}
	return reject, nil
}
