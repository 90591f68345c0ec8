package spend

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// ErrExhausted: a job's spend budget could not cover its next item;
// unstarted items stay pending.
var ErrExhausted = errors.New("budget exhausted")

// ExhaustedError is the error of job jobID stopped by its budget: spent of
// max was spent, left items were never started, and need is what they
// still need (0: unknown). It wraps ErrExhausted and says how to continue:
// `resume JOBID --max-cost-usd X` with X the spend so far plus need, rounded
// up so that it suffices, or a higher --max-cost-usd when need is unknown.
func ExhaustedError(jobID string, spent, max, need float64, left int) error {
	next := "a higher --max-cost-usd"
	if need > 0 {
		next = fmt.Sprintf("--max-cost-usd %s", FormatUSD(math.Ceil((spent+need)*1e4-1e-6)/1e4))
	}
	return fmt.Errorf("%w: spent $%s of the $%s job budget; %d item(s) left pending, never started; "+
		"continue with `resume %s %s`", ErrExhausted, FormatUSD(spent), FormatUSD(max), left, jobID, next)
}

// FormatUSD prints a dollar amount with two decimals, or up to four when
// it has them ($0.0246, not $0.02).
func FormatUSD(v float64) string {
	s := strconv.FormatFloat(math.Round(v*1e4)/1e4, 'f', 4, 64)
	for range 2 {
		s = strings.TrimSuffix(s, "0")
	}
	return s
}
