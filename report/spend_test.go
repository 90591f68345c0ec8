package report

import (
	"strings"
	"testing"
)

func TestSpendAndCooldownsInSummaryAndComment(t *testing.T) {
	t.Parallel()
	in := Input{Title: "wf", JobID: "j1", Status: "budget_exhausted", Total: 3, Successful: 2, Pending: 1,
		CostUSD: 1.6, MaxCostUSD: 2, FleetCooldowns: 2}
	for name, out := range map[string]string{"summary": Summary(in), "comment": Comment(in)} {
		for _, want := range []string{"Spend: **$1.60** of the $2.00 budget", "Rate limits: 2 fleet cool-down(s)"} {
			if !strings.Contains(out, want) {
				t.Errorf("%s lacks %q:\n%s", name, want, out)
			}
		}
	}
	in.CostUSD, in.MaxCostUSD = 0.0246, 0.05
	if out := Summary(in); !strings.Contains(out, "Spend: **$0.0246** of the $0.05 budget") {
		t.Errorf("small amounts lose their cents:\n%s", out)
	}
	in = Input{Title: "wf", JobID: "j1", Status: "completed", Total: 1, Successful: 1}
	if out := Summary(in); strings.Contains(out, "Spend") || strings.Contains(out, "Rate limits") {
		t.Errorf("a job without claude spend or cool-downs shows them:\n%s", out)
	}
}
