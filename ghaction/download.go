package ghaction

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/google/go-github/v60/github"
)

// ErrNoArtifact means a run has no unexpired artifact with the prefix.
var ErrNoArtifact = errors.New("no matching artifact")

// ErrArtifactExpired is matched by the error for an artifact past its
// retention (410, or `expired: true` in the run's list).
var ErrArtifactExpired = errors.New("artifact expired")

// expiredError names the artifact, the day it expired and its retention.
func expiredError(op string, a *github.Artifact) error {
	msg := fmt.Sprintf("%s: %v: artifact %s", op, ErrArtifactExpired, a.GetName())
	if a.ExpiresAt != nil {
		msg = fmt.Sprintf("%s: artifact %s expired on %s", op, a.GetName(), a.GetExpiresAt().UTC().Format("2006-01-02"))
		if a.CreatedAt != nil {
			days := int(a.GetExpiresAt().Sub(a.GetCreatedAt().Time).Round(24*time.Hour) / (24 * time.Hour))
			msg += fmt.Sprintf(" (retention %d days)", days)
		}
	}
	return fmt.Errorf("%s: %w", msg, ErrArtifactExpired)
}

// ErrRunNotFound is matched by the error for a 404 on a workflow run.
var ErrRunNotFound = errors.New("run not found")

// runNotFoundError is a 404 on a run's endpoints: GitHub answers 404 both
// for a missing run and for a token that may not see it.
type runNotFoundError struct {
	runID       int64
	owner, repo string
	err         error
}

func (e *runNotFoundError) Error() string {
	return fmt.Sprintf("run %d not found in %s/%s (or the token lacks `actions: read`)", e.runID, e.owner, e.repo)
}

func (e *runNotFoundError) Unwrap() error { return e.err }

// Is matches ErrRunNotFound and ErrNotFound.
func (e *runNotFoundError) Is(target error) bool {
	return target == ErrRunNotFound || target == ErrNotFound
}

func runNotFound(runID int64, owner, repo string, err error) error {
	return &runNotFoundError{runID: runID, owner: owner, repo: repo, err: err}
}

// FindRunArtifact lists the artifacts of workflow run runID (all pages) and
// returns the newest unexpired one whose name starts with prefix (highest
// id wins, as the toolkit's filterLatest does). 403 comes back as a
// *PermissionError naming `actions: read`; 404 says "run N not found in
// owner/repo (or the token lacks actions: read)" and matches ErrRunNotFound
// and ErrNotFound; only expired matches give ErrArtifactExpired with the
// expiry date and retention; no match is ErrNoArtifact.
func FindRunArtifact(ctx context.Context, gh *github.Client, owner, repo string, runID int64, prefix string) (*github.Artifact, error) {
	if runID <= 0 {
		return nil, fmt.Errorf("find artifact: invalid run id %d", runID)
	}
	op := fmt.Sprintf("list artifacts of run %d in %s/%s", runID, owner, repo)
	var best, expired *github.Artifact
	opts := &github.ListOptions{PerPage: 100}
	for {
		list, resp, err := gh.Actions.ListWorkflowRunArtifacts(ctx, owner, repo, runID, opts)
		if err != nil {
			if resp != nil && resp.StatusCode == http.StatusNotFound {
				return nil, runNotFound(runID, owner, repo, err)
			}
			return nil, classify(op, "actions: read", resp, err)
		}
		for _, a := range list.Artifacts {
			if !strings.HasPrefix(a.GetName(), prefix) {
				continue
			}
			if a.GetExpired() {
				if expired == nil || a.GetID() > expired.GetID() {
					expired = a
				}
				continue
			}
			if best == nil || a.GetID() > best.GetID() {
				best = a
			}
		}
		if resp.NextPage == 0 {
			break
		}
		opts.Page = resp.NextPage
	}
	if best == nil && expired != nil {
		return nil, expiredError(op, expired)
	}
	if best == nil {
		return nil, fmt.Errorf("%w: run %d has no unexpired artifact named %q*", ErrNoArtifact, runID, prefix)
	}
	return best, nil
}

// DownloadRunArtifact downloads the zip of artifact id: the REST endpoint
// answers 302 with a short-lived blob URL, which is fetched with blob (a
// client that carries no GitHub credentials; nil means a plain
// http.Client) so the token never reaches the storage host. maxBytes ≤ 0
// means 512 MiB. 403/404 are reported as *PermissionError; 410 as
// ErrArtifactExpired with the date and retention (read from the
// artifact's metadata).
func DownloadRunArtifact(ctx context.Context, gh *github.Client, blob *http.Client, owner, repo string, id, maxBytes int64) ([]byte, error) {
	if blob == nil {
		blob = &http.Client{}
	}
	if maxBytes <= 0 {
		maxBytes = 512 << 20
	}
	op := fmt.Sprintf("download artifact %d of %s/%s", id, owner, repo)
	loc, resp, err := gh.Actions.DownloadArtifact(ctx, owner, repo, id, 3)
	if err != nil {
		if resp != nil && resp.StatusCode == http.StatusGone {
			a, _, merr := gh.Actions.GetArtifact(ctx, owner, repo, id)
			if merr != nil || a == nil {
				return nil, fmt.Errorf("%s: the artifact has expired (HTTP 410): %w", op, ErrArtifactExpired)
			}
			return nil, expiredError(op, a)
		}
		return nil, classify(op, "actions: read", resp, err)
	}
	data, err := getLimited(ctx, blob, loc.String(), maxBytes)
	if err != nil {
		var r retryable
		if errors.As(err, &r) {
			err = r.err
		}
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	return data, nil
}
