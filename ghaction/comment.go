package ghaction

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/google/go-github/v60/github"
)

// MaxCommentChars is the largest body GitHub accepts for a comment.
const MaxCommentChars = 65536

// CommentMarker returns the hidden HTML marker that identifies our sticky
// comment. key distinguishes several sticky comments on one PR (e.g. the
// workflow name); it is sanitised so it cannot close the HTML comment.
func CommentMarker(key string) string {
	key = strings.NewReplacer(">", "", "<", "", "\n", " ", "\r", " ").Replace(key)
	for strings.Contains(key, "--") {
		key = strings.ReplaceAll(key, "--", "-")
	}
	return "<!-- prodigy-action:sticky-comment key=" + strings.TrimSpace(key) + " -->"
}

// ErrNoPullRequest means no PR number is known (0); listing comments of
// issue 0 would list every comment of the repository.
var ErrNoPullRequest = errors.New("no pull request number")

// StickyResult reports what UpsertStickyComment did.
type StickyResult struct {
	CommentID int64
	URL       string
	Created   bool
}

// UpsertStickyComment creates or edits the one comment on pull request pr
// that carries CommentMarker(key): it pages through the PR's comments
// (100 per page), edits the first one containing the marker (preferring
// one written by author, e.g. "github-actions[bot]"; "" accepts any author),
// and creates a comment otherwise. The marker is appended to body. A 403
// (fork PR with a read-only token) or 404 returns a *PermissionError that
// matches ErrForbidden/ErrNotFound so the caller can fall back to the job
// summary.
func UpsertStickyComment(ctx context.Context, gh *github.Client, owner, repo string, pr int, key, author, body string) (StickyResult, error) {
	if pr <= 0 {
		return StickyResult{}, ErrNoPullRequest
	}
	marker := CommentMarker(key)
	full := body + "\n\n" + marker + "\n"
	if len(full) > MaxCommentChars {
		return StickyResult{}, fmt.Errorf("comment body is %d characters (limit %d)", len(full), MaxCommentChars)
	}
	existing, err := findSticky(ctx, gh, owner, repo, pr, marker, author)
	if err != nil {
		return StickyResult{}, err
	}
	if existing != 0 {
		c, resp, err := gh.Issues.EditComment(ctx, owner, repo, existing, &github.IssueComment{Body: github.String(full)})
		if err != nil {
			return StickyResult{}, classify(fmt.Sprintf("edit comment %d on PR #%d", existing, pr), "pull-requests: write", resp, err)
		}
		return StickyResult{CommentID: c.GetID(), URL: c.GetHTMLURL()}, nil
	}
	c, resp, err := gh.Issues.CreateComment(ctx, owner, repo, pr, &github.IssueComment{Body: github.String(full)})
	if err != nil {
		return StickyResult{}, classify(fmt.Sprintf("comment on PR #%d", pr), "pull-requests: write", resp, err)
	}
	return StickyResult{CommentID: c.GetID(), URL: c.GetHTMLURL(), Created: true}, nil
}

// findSticky returns the id of our marked comment, or 0.
func findSticky(ctx context.Context, gh *github.Client, owner, repo string, pr int, marker, author string) (int64, error) {
	opts := &github.IssueListCommentsOptions{ListOptions: github.ListOptions{PerPage: 100}}
	var anyAuthor int64
	for {
		list, resp, err := gh.Issues.ListComments(ctx, owner, repo, pr, opts)
		if err != nil {
			return 0, classify(fmt.Sprintf("list comments of PR #%d", pr), "pull-requests: read", resp, err)
		}
		for _, c := range list {
			if !strings.Contains(c.GetBody(), marker) {
				continue
			}
			if author == "" || c.GetUser().GetLogin() == author {
				return c.GetID(), nil
			}
			if anyAuthor == 0 {
				anyAuthor = c.GetID()
			}
		}
		if resp.NextPage == 0 {
			break
		}
		opts.Page = resp.NextPage
	}
	// A marked comment by someone else (e.g. a PAT user instead of the bot)
	// is still ours to update; editing it fails with 403 if it is not.
	return anyAuthor, nil
}
