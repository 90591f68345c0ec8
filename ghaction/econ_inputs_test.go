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

func TestReadInputsCanary(t *testing.T) {
	t.Parallel()
	in, err := ReadInputs(actionWith(map[string]string{"INPUT_COMMAND": "retry", "INPUT_RETRY-FROM-RUN": "5",
		"INPUT_RETRY-SIGNATURE": "CommandFailed::database unreachable", "INPUT_RETRY-SAMPLE": "3"}))
	if err != nil || in.RetrySignature != "CommandFailed::database unreachable" || in.RetrySample != 3 {
		t.Fatalf("inputs %+v, err %v", in, err)
	}
	for input, want := range map[string]string{"-1": "input retry-sample", "two": "input retry-sample"} {
		_, err := ReadInputs(actionWith(map[string]string{"INPUT_WORKFLOW": "wf.yml", "INPUT_RETRY-SIGNATURE": "x", "INPUT_RETRY-SAMPLE": input}))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("retry-sample %q: err %v", input, err)
		}
	}
	_, err = ReadInputs(actionWith(map[string]string{"INPUT_WORKFLOW": "wf.yml", "INPUT_RETRY-SAMPLE": "2"}))
	if err == nil || !strings.Contains(err.Error(), "retry-sample needs retry-signature") {
		t.Errorf("retry-sample without retry-signature: err %v", err)
	}
}
