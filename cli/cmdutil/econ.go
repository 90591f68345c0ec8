package cmdutil

import (
	"math"

	"github.com/spf13/pflag"
)

// MaxCostFlag registers --max-cost-usd: the job's spend budget in US
// dollars, overriding the workflow's budget.max_cost_usd.
func MaxCostFlag(fs *pflag.FlagSet, p *float64) {
	fs.Float64Var(p, "max-cost-usd", 0, "the job's spend budget in US dollars, all runs included (overrides budget.max_cost_usd)")
}

// CheckMaxCost validates a --max-cost-usd value.
func CheckMaxCost(v float64) error {
	if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return UsageErrorf("--max-cost-usd must be a positive amount of US dollars, got %v", v)
	}
	return nil
}

// RedriveFlags registers --workflow and --onto of `resume` and `dlq retry`.
func RedriveFlags(fs *pflag.FlagSet, workflow, onto *string) {
	fs.StringVar(workflow, "workflow", "", "workflow file to run (default: the job's workflow file in the checkout, else the copy stored with the job)")
	fs.StringVar(onto, "onto", "", "merge this branch or revision (e.g. main with the fix) into the results branch first; a conflict changes nothing")
}
