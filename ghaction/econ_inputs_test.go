package ghaction

import (
	"strings"
	"testing"
)

func TestReadInputsBudgetAndOnto(t *testing.T) {
	t.Parallel()
	in, err := ReadInputs(actionWith(map[string]string{"INPUT_COMMAND": "retry", "INPUT_RETRY-FROM-RUN": "5",
		"INPUT_RETRY-ONTO": "main", "INPUT_MAX-COST-USD": "12.5"}))
	if err != nil || in.RetryOnto != "main" || in.MaxCostUSD != 12.5 {
		t.Fatalf("inputs %+v, err %v", in, err)
	}
	for _, bad := range []string{"-1", "0", "lots", "NaN", "Inf"} {
		_, err := ReadInputs(actionWith(map[string]string{"INPUT_WORKFLOW": "wf.yml", "INPUT_MAX-COST-USD": bad}))
		if err == nil || !strings.Contains(err.Error(), "input max-cost-usd") {
			t.Errorf("max-cost-usd %q: err %v", bad, err)
		}
	}
}
