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

// JobTokenLogin is the author of comments made with a workflow's job token
// (GITHUB_TOKEN).
const JobTokenLogin = "github-actions[bot]"

// TokenLogin returns the login that comments made with gh's token carry:
// GET /user's login for a user token (PAT, OAuth); JobTokenLogin when GitHub
// refuses /user (401/403/404), as it does for the job token and other
// installation tokens. Other failures are returned.
func TokenLogin(ctx context.Context, gh *github.Client) (string, error) {
	u, resp, err := gh.Users.Get(ctx, "")
	if err != nil {
		if resp != nil && (resp.StatusCode == 401 || resp.StatusCode == 403 || resp.StatusCode == 404) {
			return JobTokenLogin, nil
		}
		return "", fmt.Errorf("identify the token's user (GET /user): %w", err)
	}
	if u.GetLogin() == "" {
		return JobTokenLogin, nil
	}
	return u.GetLogin(), nil
}

// UpsertStickyComment creates or edits the one comment on pull request pr
// that carries CommentMarker(key) and was written by author: it pages
// through the PR's comments (100 per page), edits the first one with the
// marker whose author is author, and creates a comment otherwise. A marked
// comment by anyone else is ignored, so nobody can pre-claim the sticky
// comment by quoting the marker. author "" means the token's own identity
// (TokenLogin). The marker is appended to body. A 403 (fork PR with a
// read-only token) or 404 returns a *PermissionError that matches
// ErrForbidden/ErrNotFound so the caller can fall back to the job summary.
func UpsertStickyComment(ctx context.Context, gh *github.Client, owner, repo string, pr int, key, author, body string) (StickyResult, error) {
	if pr <= 0 {
		return StickyResult{}, ErrNoPullRequest
	}
	marker := CommentMarker(key)
	full := body + "\n\n" + marker + "\n"
	if len(full) > MaxCommentChars {
		return StickyResult{}, fmt.Errorf("comment body is %d characters (limit %d)", len(full), MaxCommentChars)
	}
	if author == "" {
		var err error
		if author, err = TokenLogin(ctx, gh); err != nil {
			return StickyResult{}, err
		}
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

// findSticky returns the id of the first comment carrying marker written
// by author, or 0.
func findSticky(ctx context.Context, gh *github.Client, owner, repo string, pr int, marker, author string) (int64, error) {
	opts := &github.IssueListCommentsOptions{ListOptions: github.ListOptions{PerPage: 100}}
	for {
		list, resp, err := gh.Issues.ListComments(ctx, owner, repo, pr, opts)
		if err != nil {
			return 0, classify(fmt.Sprintf("list comments of PR #%d", pr), "pull-requests: read", resp, err)
		}
		for _, c := range list {
			if strings.Contains(c.GetBody(), marker) && strings.EqualFold(c.GetUser().GetLogin(), author) {
				return c.GetID(), nil
			}
		}
		if resp.NextPage == 0 {
			return 0, nil
		}
		opts.Page = resp.NextPage
	}
}
