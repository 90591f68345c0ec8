package report

import (
	"strings"
	"testing"
)

// TestStormAndCostRender: a failure storm shows as a warning with the
// signature, the items and the continue command, escaped like any item
// text; the spend line splits merged, lost and per merged item.
func TestStormAndCostRender(t *testing.T) {
	in := Input{JobID: "j", Status: "stopped_by_breaker", Total: 100, Successful: 20, Failed: 10, Pending: 70, DLQCount: 10,
		CostUSD: 3, MergedCostUSD: 2, FailedCostUSD: 1, CostPerMergedUSD: 0.15,
		Storm: &Storm{Signature: "CommandFailed::npm ERR! <b>@team</b>", Items: []string{"item_20", "item_21"}, Consecutive: 10, Continue: "resume j --include-dlq"}}
	for name, out := range map[string]string{"summary": Summary(in), "comment": Comment(in)} {
		for _, want := range []string{"Failure storm: launching stopped.", "10 items in a row failed with CommandFailed\\:\\:npm ERR\\! &lt;b&gt;@\u200bteam&lt;/b&gt;",
			"item\\_20, item\\_21", "70 item(s) were not started", "After fixing the cause: resume j --include-dlq",
			"merged items $2.00 · lost to failures $1.00 · **$0.15 per merged item**"} {
			if !strings.Contains(out, want) {
				t.Errorf("%s lacks %q:\n%s", name, want, out)
			}
		}
		if strings.Contains(out, "<b>") {
			t.Errorf("%s carries raw HTML from the signature", name)
		}
	}
}
