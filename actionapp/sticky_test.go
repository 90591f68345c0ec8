package actionapp

import (
	"strings"
	"testing"

	"github.com/prodigy-action/prodigy-action/ghaction"
)

// An upgrade from the version whose comment key was "<workflow name> /
// <job>" edits that comment (and re-keys it) instead of adding a second.
func TestActionUpgradeKeepsOneStickyComment(t *testing.T) {
	t.Parallel()
	gh := newFakeGitHub(t)
	gh.runID = 555
	gh.comments = append(gh.comments, map[string]any{"id": 42, "body": "old results\n\n" + ghaction.CommentMarker("example / fanout") + "\n",
		"user": map[string]any{"login": "github-actions[bot]", "type": "Bot"}})
	repo := cliRepo(t, map[string]string{"workflow.yml": actionWorkflow, "items.json": actionItems})
	for run := range 2 {
		at := newActionTest(t, gh, repo, nil)
		if code := at.run(t); code != exitOK {
			t.Fatalf("run %d: exit %d\n%s", run, code, at.errb.String())
		}
	}
	gh.mu.Lock()
	defer gh.mu.Unlock()
	if len(gh.comments) != 1 || gh.patches != 2 {
		t.Fatalf("comments %d, patches %d; want the one legacy comment edited twice", len(gh.comments), gh.patches)
	}
	body := gh.comments[0]["body"].(string)
	if !strings.Contains(body, ghaction.CommentMarker("example.yml / fanout")) || strings.Contains(body, "old results") {
		t.Errorf("comment not re-keyed and updated: %q", body)
	}
}
