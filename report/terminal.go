package report

import (
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/prodigy-action/prodigy-action/dlq"
	"github.com/prodigy-action/prodigy-action/runner"
)

// MaxTermCell bounds one terminal table cell (runes); longer text is cut
// with "…" so one hostile value cannot flood the terminal.
const MaxTermCell = 200

// TermCell renders a value for a terminal table cell: "-" when empty,
// cut to MaxTermCell runes, and Go-quoted when it holds control
// characters, tabs or leading/trailing spaces, so rows stay one line.
func TermCell(s string) string {
	if s == "" {
		return "-"
	}
	s = Truncate(s, MaxTermCell)
	if strings.TrimSpace(s) != s || strings.IndexFunc(s, func(r rune) bool { return unicode.IsControl(r) || r == unicode.ReplacementChar }) >= 0 {
		return strconv.Quote(s)
	}
	return s
}

// DLQList is the --json output of `dlq list`.
type DLQList struct {
	JobID string `json:"job_id"`
	Repo  string `json:"repo"`
	// Total is the number of records that matched (before --limit).
	Total int           `json:"total"`
	Items []dlq.Summary `json:"items"`
}

// DLQStats is the --json output of `dlq stats`: the job, then the
// statistics keys of dlq.Statistics.
type DLQStats struct {
	JobID string `json:"job_id"`
	Repo  string `json:"repo"`
	dlq.Statistics
}

// DLQAnalysis is what `dlq analyze --export` writes and --json prints.
type DLQAnalysis struct {
	JobID string `json:"job_id"`
	Repo  string `json:"repo"`
	dlq.Analysis
}

// WriteDLQTable writes the `dlq list` table: one row per record.
func WriteDLQTable(w io.Writer, rows []dlq.Summary) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ITEM ID\tLABEL\tERROR TYPE\tFAILURES\tELIGIBLE\tLAST ATTEMPT\tSIGNATURE")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%t\t%s\t%s\n", TermCell(r.ItemID), TermCell(r.Label), TermCell(r.ErrorType.Label()), r.FailureCount,
			r.ReprocessEligible, r.LastAttempt.UTC().Format(time.RFC3339), TermCell(r.ErrorSignature))
	}
	return tw.Flush()
}

// WriteDLQAnalysis writes the human form of `dlq analyze`.
func WriteDLQAnalysis(w io.Writer, ref runner.Paths, an dlq.Analysis) error {
	fmt.Fprintf(w, "Job %s (repo %s): %d dead-lettered items\n", ref.JobID, ref.Repo, an.TotalItems)
	if an.TotalItems == 0 {
		return nil
	}
	fmt.Fprintln(w, "\nPattern groups (records sharing an error signature):")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	spent := false
	for _, g := range an.PatternGroups {
		spent = spent || g.SpendLostUSD > 0
	}
	if spent {
		fmt.Fprintln(tw, "  COUNT\tSPEND LOST\tSIGNATURE\tLAST SEEN\tSAMPLE ITEMS")
	} else {
		fmt.Fprintln(tw, "  COUNT\tSIGNATURE\tLAST SEEN\tSAMPLE ITEMS")
	}
	for _, g := range an.PatternGroups {
		samples := make([]string, len(g.SampleItems))
		for i, s := range g.SampleItems {
			samples[i] = TermCell(s)
		}
		if spent {
			fmt.Fprintf(tw, "  %d\t$%s\t%s\t%s\t%s\n", g.Count, USD(g.SpendLostUSD), TermCell(g.Signature), g.LastOccurrence.Format(time.RFC3339), strings.Join(samples, ", "))
			continue
		}
		fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\n", g.Count, TermCell(g.Signature), g.LastOccurrence.Format(time.RFC3339), strings.Join(samples, ", "))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "\nError distribution (every failed attempt):")
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, k := range sortedKeys(an.ErrorDistribution) {
		fmt.Fprintf(tw, "  %s\t%d\n", TermCell(k), an.ErrorDistribution[k])
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "\nTemporal distribution (records per hour of last attempt, UTC):")
	for _, h := range an.TemporalDistribution {
		fmt.Fprintf(w, "  %s  %d\n", h.Hour.Format("2006-01-02T15:04Z"), h.Count)
	}
	return nil
}

// WriteDLQStats writes the human form of `dlq stats`.
func WriteDLQStats(w io.Writer, ref runner.Paths, st dlq.Statistics) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "Job:\t%s (repo %s)\n", ref.JobID, ref.Repo)
	fmt.Fprintf(tw, "Total items:\t%d\n", st.TotalItems)
	fmt.Fprintf(tw, "Eligible for reprocess:\t%d\n", st.EligibleForReprocess)
	fmt.Fprintf(tw, "Requiring manual review:\t%d\n", st.RequiringManualReview)
	if st.OldestItem != nil {
		fmt.Fprintf(tw, "Oldest item (first attempt):\t%s\n", st.OldestItem.Format(time.RFC3339))
		fmt.Fprintf(tw, "Newest item (last attempt):\t%s\n", st.NewestItem.Format(time.RFC3339))
	}
	fmt.Fprintf(tw, "Average failure count:\t%.2f\n", st.AverageFailureCount)
	if err := tw.Flush(); err != nil {
		return err
	}
	if err := writeCounts(w, "By error type (newest failure):", st.ByErrorType); err != nil {
		return err
	}
	return writeCounts(w, "Error categories (by signature):", st.ErrorCategories)
}

// writeCounts writes a count map largest first, then by key.
func writeCounts(w io.Writer, title string, m map[string]int) error {
	if len(m) == 0 {
		return nil
	}
	keys := sortedKeys(m)
	sort.SliceStable(keys, func(i, j int) bool { return m[keys[i]] > m[keys[j]] })
	fmt.Fprintln(w, title)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	for _, k := range keys {
		fmt.Fprintf(tw, "  %d\t  %s\n", m[k], TermCell(k))
	}
	return tw.Flush()
}

// WriteStatus writes the human form of `status`.
func WriteStatus(w io.Writer, res *runner.Result) {
	fmt.Fprintf(w, "job:            %s (%s)\n", res.JobID, res.WorkflowName)
	fmt.Fprintf(w, "status:         %s\n", res.Status)
	fmt.Fprintf(w, "repository:     %s\n", res.RepoDir)
	fmt.Fprintf(w, "results branch: %s\n", res.ResultsBranch)
	fmt.Fprintf(w, "items:          %d total, %d succeeded, %d failed, %d skipped, %d pending\n", res.Total, res.Successful, res.Failed, res.Skipped, res.Pending)
	fmt.Fprintf(w, "dlq:            %d record(s)\n", res.DLQCount)
	if res.CostUSD > 0 || res.MaxCostUSD > 0 {
		fmt.Fprintf(w, "cost:           $%.4f", res.CostUSD)
		if res.MaxCostUSD > 0 {
			fmt.Fprintf(w, " of the $%s budget", USD(res.MaxCostUSD))
		}
		if res.CostUSD > 0 {
			fmt.Fprintf(w, " (merged items $%s, lost to failures $%s", USD(res.MergedCostUSD), USD(res.FailedCostUSD))
			if res.CostPerMergedUSD > 0 {
				fmt.Fprintf(w, ", $%s per merged item", USD(res.CostPerMergedUSD))
			}
			fmt.Fprint(w, ")")
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "duration:       %dms\n", res.DurationMS)
	if len(res.OrphanedWorktrees) > 0 {
		fmt.Fprintf(w, "orphaned worktrees (remove with `prodigy-action worktree clean-orphaned %s`):\n", res.JobID)
		for _, o := range res.OrphanedWorktrees {
			fmt.Fprintf(w, "  %s (item %s): %s\n", o.Path, o.ItemID, Truncate(o.Error, MaxTermCell))
		}
	}
	if res.Error != "" {
		fmt.Fprintf(w, "note:           %s\n", res.Error)
	}
}

// WriteOrphans lists the orphaned worktrees of job jobID one per line and
// returns how many.
func WriteOrphans(w io.Writer, jobID string, worktrees []runner.OrphanedWorktree) int {
	for _, o := range worktrees {
		fmt.Fprintf(w, "%s  job %s  item %s  (%s)\n", o.Path, jobID, TermCell(o.ItemID), Truncate(o.Error, MaxTermCell))
	}
	return len(worktrees)
}

// WriteDemoOutcome writes what `prodigy-action demo` shows after its job: the
// results branch's history (graph) and files as git printed them, and the
// commands to look at the outcome next.
func WriteDemoOutcome(w io.Writer, res *runner.Result, graph, files string) {
	fmt.Fprintf(w, "\nresults branch %s:\n%s", res.ResultsBranch, graph)
	fmt.Fprintf(w, "\nfiles on the results branch:\n%s", files)
	fmt.Fprintf(w, "\nnext steps:\n")
	fmt.Fprintf(w, "  go run ./cmd/action dlq list --job-id %s\n", res.JobID)
	_ = res.EachItem(func(it runner.ItemOutcome) error {
		if it.State == runner.ItemDLQ {
			fmt.Fprintf(w, "  go run ./cmd/action dlq inspect %s --job-id %s\n", it.ItemID, res.JobID)
			return errFound
		}
		return nil
	})
	fmt.Fprintf(w, "  go run ./cmd/action dlq retry %s   # re-runs it; the failure is deterministic, so it fails again\n", res.JobID)
	fmt.Fprintf(w, "  go run ./cmd/action status %s\n", res.JobID)
}

// errFound ends an EachItem walk at the item looked for.
var errFound = errors.New("found")

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
