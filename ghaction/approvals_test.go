package ghaction

import (
	"maps"
	"testing"
)

// TestReviewVerdict: only approving reviews of the environment count
// (names compare without case, as GitHub's); "reject ITEM_ID[: reason]"
// lines anywhere in their comments reject items, with the reviewer named;
// the first reviewer to reject an item keeps the reason.
func TestReviewVerdict(t *testing.T) {
	approvals := []Approval{
		{State: "rejected", Environments: []string{"publish"}, User: "no", Comment: "reject item_9: rejected reviews do not count"},
		{State: "approved", Environments: []string{"staging"}, User: "other", Comment: "reject item_8: another environment"},
		{State: "approved", Environments: []string{"Publish"}, User: "ann", Comment: "LGTM except\n  REJECT item_1: breaks the API  \nreject item_2\nreject: not an item\nplease reject item_3 later"},
		{State: "approved", Environments: []string{"publish"}, User: "bob", Comment: "reject item_1: second opinion\r\nreject item_4:"},
	}
	approved, rejected := ReviewVerdict(approvals, "publish")
	want := map[string]string{"item_1": "breaks the API (@ann)", "item_2": "rejected (@ann)", "item_4": "rejected (@bob)"}
	if !approved || !maps.Equal(rejected, want) {
		t.Fatalf("ReviewVerdict = %v %v, want true %v", approved, rejected, want)
	}
	if approved, rejected := ReviewVerdict(approvals[:2], "publish"); approved || len(rejected) != 0 {
		t.Fatalf("without an approval of the environment: %v %v", approved, rejected)
	}
}
