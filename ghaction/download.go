package ghaction

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/google/go-github/v60/github"
)

// ErrNoArtifact means a run has no unexpired artifact with the prefix.
var ErrNoArtifact = errors.New("no matching artifact")

// FindRunArtifact lists the artifacts of workflow run runID (all pages) and
// returns the newest unexpired one whose name starts with prefix (highest
// id wins, as the toolkit's filterLatest does). 403/404 come back as a
// *PermissionError naming `actions: read`; no match is ErrNoArtifact.
func FindRunArtifact(ctx context.Context, gh *github.Client, owner, repo string, runID int64, prefix string) (*github.Artifact, error) {
	if runID <= 0 {
		return nil, fmt.Errorf("find artifact: invalid run id %d", runID)
	}
	op := fmt.Sprintf("list artifacts of run %d in %s/%s", runID, owner, repo)
	var best *github.Artifact
	opts := &github.ListOptions{PerPage: 100}
	for {
		list, resp, err := gh.Actions.ListWorkflowRunArtifacts(ctx, owner, repo, runID, opts)
		if err != nil {
			return nil, classify(op, "actions: read", resp, err)
		}
		for _, a := range list.Artifacts {
			if a.GetExpired() || !strings.HasPrefix(a.GetName(), prefix) {
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
	if best == nil {
		return nil, fmt.Errorf("%w: run %d has no unexpired artifact named %q*", ErrNoArtifact, runID, prefix)
	}
	return best, nil
}

// DownloadRunArtifact downloads the zip of artifact id: the REST endpoint
// answers 302 with a short-lived blob URL, which is fetched with blob (a
// client that carries no GitHub credentials; nil means a plain
// http.Client) so the token never reaches the storage host. maxBytes ≤ 0
// means 512 MiB. 403/404/410 are reported as *PermissionError or a clear
// expiry error.
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
			return nil, fmt.Errorf("%s: the artifact has expired (HTTP 410)", op)
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
