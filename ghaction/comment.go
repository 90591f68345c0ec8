package ghaction

import (
	"context"
	"errors"
	"fmt"
	"sort"
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

// UpsertStickyComment is UpsertSticky with no legacy keys.
func UpsertStickyComment(ctx context.Context, gh *github.Client, owner, repo string, pr int, key, author, body string) (StickyResult, error) {
	return UpsertSticky(ctx, gh, Sticky{Owner: owner, Repo: repo, PR: pr, Key: key, Author: author, Body: body})
}

// Sticky describes the one sticky comment of a pull request.
type Sticky struct {
	Owner, Repo string
	// PR is the pull request number (> 0).
	PR int
	// Key is the comment's key (CommentMarker).
	Key string
	// LegacyKeys are keys earlier versions derived for the same comment:
	// a comment carrying one of their markers is taken over (and gets
	// Key's marker), so an upgrade never makes a second comment.
	LegacyKeys []string
	// Author is the login the token comments as; "" asks GitHub
	// (TokenLogin).
	Author string
	// Body is the comment text; the marker is appended.
	Body string
}

// UpsertSticky creates or edits the one comment on pull request s.PR that
// carries the marker of s.Key (or of a legacy key). It pages through the
// PR's comments (100 per page) and considers the marked comments written
// by the token's own login or by any bot account (user type "Bot": GitHub
// Apps and github-actions[bot], which nobody can post as by quoting the
// marker), so a comment posted with the job token is found again when a
// GitHub App token (another bot) is used, and the other way round. A
// marked comment by a person other than the token's user is ignored, so
// nobody can pre-claim the sticky comment. Candidates are tried in order
// (Key before legacy keys, the token's own before other bots', then
// oldest first); one that may not be edited (403) is passed over, and a
// comment is created only when none could be edited. A 403 (fork PR with
// a read-only token) or 404 on creating returns a *PermissionError that
// matches ErrForbidden/ErrNotFound so the caller can fall back to the job
// summary.
func UpsertSticky(ctx context.Context, gh *github.Client, s Sticky) (StickyResult, error) {
	if s.PR <= 0 {
		return StickyResult{}, ErrNoPullRequest
	}
	marker := CommentMarker(s.Key)
	full := s.Body + "\n\n" + marker + "\n"
	if len(full) > MaxCommentChars {
		return StickyResult{}, fmt.Errorf("comment body is %d characters (limit %d)", len(full), MaxCommentChars)
	}
	author := s.Author
	if author == "" {
		var err error
		if author, err = TokenLogin(ctx, gh); err != nil {
			return StickyResult{}, err
		}
	}
	markers := []string{marker}
	for _, k := range s.LegacyKeys {
		if m := CommentMarker(k); m != marker {
			markers = append(markers, m)
		}
	}
	cands, err := findSticky(ctx, gh, s.Owner, s.Repo, s.PR, markers, author)
	if err != nil {
		return StickyResult{}, err
	}
	for _, id := range cands {
		c, resp, err := gh.Issues.EditComment(ctx, s.Owner, s.Repo, id, &github.IssueComment{Body: github.String(full)})
		if err == nil {
			return StickyResult{CommentID: c.GetID(), URL: c.GetHTMLURL()}, nil
		}
		if resp != nil && resp.StatusCode == 403 {
			continue // another bot's comment this token may not edit
		}
		return StickyResult{}, classify(fmt.Sprintf("edit comment %d on PR #%d", id, s.PR), "pull-requests: write", resp, err)
	}
	c, resp, err := gh.Issues.CreateComment(ctx, s.Owner, s.Repo, s.PR, &github.IssueComment{Body: github.String(full)})
	if err != nil {
		return StickyResult{}, classify(fmt.Sprintf("comment on PR #%d", s.PR), "pull-requests: write", resp, err)
	}
	return StickyResult{CommentID: c.GetID(), URL: c.GetHTMLURL(), Created: true}, nil
}

// findSticky returns the ids of the comments carrying one of markers
// whose author is author or a bot, best first: by marker (the first marker
// before the others), then the author's own before other bots', then
// oldest first.
func findSticky(ctx context.Context, gh *github.Client, owner, repo string, pr int, markers []string, author string) ([]int64, error) {
	type cand struct {
		id            int64
		marker, other int
	}
	var found []cand
	opts := &github.IssueListCommentsOptions{ListOptions: github.ListOptions{PerPage: 100}}
	for {
		list, resp, err := gh.Issues.ListComments(ctx, owner, repo, pr, opts)
		if err != nil {
			return nil, classify(fmt.Sprintf("list comments of PR #%d", pr), "pull-requests: read", resp, err)
		}
		for _, c := range list {
			own := strings.EqualFold(c.GetUser().GetLogin(), author)
			if !own && c.GetUser().GetType() != "Bot" {
				continue
			}
			for i, m := range markers {
				if strings.Contains(c.GetBody(), m) {
					other := 0
					if !own {
						other = 1
					}
					found = append(found, cand{id: c.GetID(), marker: i, other: other})
					break
				}
			}
		}
		if resp.NextPage == 0 {
			break
		}
		opts.Page = resp.NextPage
	}
	sort.SliceStable(found, func(a, b int) bool {
		if found[a].marker != found[b].marker {
			return found[a].marker < found[b].marker
		}
		return found[a].other < found[b].other
	})
	ids := make([]int64, len(found))
	for i, c := range found {
		ids[i] = c.id
	}
	return ids, nil
}
