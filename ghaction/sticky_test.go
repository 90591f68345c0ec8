package ghaction

import (
	"context"
	"net/http"
	"strings"
	"testing"
)

// A comment posted with the job token (github-actions[bot]) is edited,
// not duplicated, when the workflow switches to a GitHub App token, whose
// comments are by another bot and which may not read /user; a person
// quoting the marker is still ignored.
func TestStickyCommentFoundWhateverBotPostedIt(t *testing.T) {
	t.Parallel()
	gh, mux, _ := setupGitHub(t)
	f := &fakeComments{nextID: 100, poster: map[string]any{"login": "my-app[bot]", "type": "Bot"}}
	marker := CommentMarker("ci.yml / fanout")
	f.comments = append(f.comments,
		map[string]any{"id": int64(1), "body": "quoting\n" + marker, "user": map[string]any{"login": "mallory", "type": "User"}},
		map[string]any{"id": int64(2), "body": "old results\n\n" + marker + "\n", "user": map[string]any{"login": "github-actions[bot]", "type": "Bot"}})
	f.register(t, mux, 4)
	mux.HandleFunc("/user", func(w http.ResponseWriter, _ *http.Request) { forbidden(w) }) // installation tokens
	for run := range 3 {
		res, err := UpsertSticky(context.Background(), gh, Sticky{Owner: "o", Repo: "r", PR: 4, Key: "ci.yml / fanout", Body: "results"})
		if err != nil {
			t.Fatal(err)
		}
		if res.Created || res.CommentID != 2 {
			t.Fatalf("run %d: %+v, want an edit of comment 2", run, res)
		}
	}
	if f.posts != 0 || f.patches != 3 || f.comments[0]["body"] != "quoting\n"+marker {
		t.Errorf("posts %d, patches %d, mallory's %q", f.posts, f.patches, f.comments[0]["body"])
	}
}

// When the earlier bot's comment may not be edited by the new token
// (403), one comment of its own is created, and later runs edit that one:
// never a comment per run.
func TestStickyCommentUneditableBotCommentGivesOneNewComment(t *testing.T) {
	t.Parallel()
	gh, mux, _ := setupGitHub(t)
	f := &fakeComments{nextID: 100, poster: map[string]any{"login": "my-app[bot]", "type": "Bot"}, noEdit: map[int64]bool{2: true}}
	f.comments = append(f.comments, map[string]any{"id": int64(2), "body": CommentMarker("k"), "user": map[string]any{"login": "github-actions[bot]", "type": "Bot"}})
	f.register(t, mux, 4)
	mux.HandleFunc("/user", func(w http.ResponseWriter, _ *http.Request) { forbidden(w) })
	for run := range 3 {
		res, err := UpsertSticky(context.Background(), gh, Sticky{Owner: "o", Repo: "r", PR: 4, Key: "k", Body: "results"})
		if err != nil {
			t.Fatal(err)
		}
		if res.CommentID != 101 || res.Created != (run == 0) {
			t.Fatalf("run %d: %+v, want comment 101 (created on the first run only)", run, res)
		}
	}
	if f.posts != 1 {
		t.Errorf("posts = %d, want 1", f.posts)
	}
}

// A comment keyed by an older version's key format is taken over (and
// re-keyed) on upgrade instead of getting a second comment; a comment with
// the current key wins over a legacy one.
func TestStickyCommentTakesOverALegacyKey(t *testing.T) {
	t.Parallel()
	gh, mux, _ := setupGitHub(t)
	f := &fakeComments{nextID: 100}
	f.comments = append(f.comments, map[string]any{"id": int64(5), "body": "old\n\n" + CommentMarker("CI / fanout") + "\n", "user": map[string]any{"login": "github-actions[bot]", "type": "Bot"}})
	f.register(t, mux, 4)
	s := Sticky{Owner: "o", Repo: "r", PR: 4, Key: "ci.yml / fanout", LegacyKeys: []string{"CI / fanout"}, Author: JobTokenLogin, Body: "new"}
	res, err := UpsertSticky(context.Background(), gh, s)
	if err != nil || res.Created || res.CommentID != 5 {
		t.Fatalf("upgrade: %+v, %v; want an edit of the legacy comment 5", res, err)
	}
	body := f.comments[0]["body"].(string)
	if !strings.Contains(body, CommentMarker("ci.yml / fanout")) || strings.Contains(body, CommentMarker("CI / fanout")) {
		t.Errorf("the legacy comment was not re-keyed: %q", body)
	}
	// Both markers present (say a manual re-post): the current key wins.
	f.comments = append(f.comments, map[string]any{"id": int64(6), "body": CommentMarker("CI / fanout"), "user": map[string]any{"login": "github-actions[bot]", "type": "Bot"}})
	if res, err := UpsertSticky(context.Background(), gh, s); err != nil || res.CommentID != 5 || f.posts != 0 {
		t.Fatalf("second run: %+v, %v (posts %d); want comment 5 again", res, err, f.posts)
	}
}
