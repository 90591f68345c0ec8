package report

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Size limits of the rendered documents.
const (
	// MaxSummaryBytes keeps the job summary under the runner's 1 MiB
	// per-step limit with room for other steps' lines.
	MaxSummaryBytes = 1_000_000
	// MaxCommentChars keeps the comment under GitHub's 65,536-character
	// limit, leaving room for the sticky marker ghaction appends.
	MaxCommentChars = 65_000
)

// Fixed caps on the secondary sections (rows beyond them are counted in an
// "…and N more" line), so that dropping failed-item rows always fits.
const (
	maxPatternRows = 50
	maxOrphanRows  = 50
	maxNotices     = 20
)

// Summary renders the job summary: status and totals, a table of failed
// items (id, error type, signature, attempts, last error, log location),
// failure patterns, orphaned worktrees, the DLQ artifact and its expiry,
// and how to redrive. When the table would push it over MaxSummaryBytes,
// rows are dropped from the end and an "…and N more" line says how many.
func Summary(in Input) string {
	return fit(MaxSummaryBytes, len(in.FailedItems), func(rows int) string { return summary(in, rows) })
}

// Comment renders the sticky PR comment: the same essentials as Summary in
// a shorter form (at most 20 failed items and 5 patterns, shorter cells),
// under MaxCommentChars.
func Comment(in Input) string {
	return fit(MaxCommentChars, min(len(in.FailedItems), 20), func(rows int) string { return comment(in, rows) })
}

// fit renders with the largest row count in [0, n] whose output is at most
// limit bytes (binary search); render(0) is bounded by the fixed caps.
func fit(limit, n int, render func(rows int) string) string {
	if out := render(n); len(out) <= limit {
		return out
	}
	lo, hi := 0, n-1 // render(lo) fits (assumed), render(hi+1) does not
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if len(render(mid)) <= limit {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return render(lo)
}

func summary(in Input, rows int) string {
	var b strings.Builder
	header(&b, in, "##")
	storm(&b, in)
	notices(&b, in)
	totals(&b, in)
	if len(in.FailedItems) > 0 {
		fmt.Fprintf(&b, "### Failed items (%d)\n\n", len(in.FailedItems))
		b.WriteString("| Item | Error type | Signature | Attempts | Last error | Log |\n")
		b.WriteString("|---|---|---|---:|---|---|\n")
		for _, it := range in.FailedItems[:rows] {
			fmt.Fprintf(&b, "| %s%s | %s | %s | %d | %s | %s |\n",
				Cell(it.ItemID, 120), ineligible(it), Cell(it.ErrorType, 40), Cell(it.Signature, 160),
				it.Attempts, Cell(it.LastError, 300), Cell(it.LogLocation, 200))
		}
		more(&b, len(in.FailedItems)-rows, "see the DLQ artifact for every record")
		if anyIneligible(in.FailedItems[:rows]) {
			b.WriteString("\n† not eligible for automatic reprocessing: redrive with `retry-force: true`.\n")
		}
		b.WriteString("\n")
	}
	patterns(&b, in.Patterns, maxPatternRows, 160)
	orphans(&b, in)
	artifact(&b, in)
	redrive(&b, in)
	return b.String()
}

func comment(in Input, rows int) string {
	var b strings.Builder
	header(&b, in, "###")
	storm(&b, in)
	notices(&b, in)
	fmt.Fprintf(&b, "**%d** items: **%d** merged, **%d** failed, **%d** skipped", in.Total, in.Successful, in.Failed, in.Skipped)
	if in.Pending > 0 {
		fmt.Fprintf(&b, ", **%d** pending", in.Pending)
	}
	fmt.Fprintf(&b, " · **%d** in the dead letter queue\n\n", in.DLQCount)
	spend(&b, in)
	branch(&b, in)
	if len(in.FailedItems) > 0 {
		b.WriteString("| Item | Error type | Attempts | Last error |\n|---|---|---:|---|\n")
		for _, it := range in.FailedItems[:rows] {
			fmt.Fprintf(&b, "| %s%s | %s | %d | %s |\n", Cell(it.ItemID, 80), ineligible(it), Cell(it.ErrorType, 40), it.Attempts, Cell(it.LastError, 120))
		}
		more(&b, len(in.FailedItems)-rows, "see the job summary")
		if anyIneligible(in.FailedItems[:rows]) {
			b.WriteString("\n† not eligible for automatic reprocessing: redrive with `retry-force: true`.\n")
		}
		b.WriteString("\n")
	}
	patterns(&b, in.Patterns, 5, 100)
	artifact(&b, in)
	redrive(&b, in)
	if in.RunURL != "" {
		fmt.Fprintf(&b, "[Full job summary](%s)\n", safeURL(in.RunURL))
	}
	return b.String()
}

func header(b *strings.Builder, in Input, level string) {
	title := in.Title
	if title == "" {
		title = "prodigy-action"
	}
	icon := "✅"
	switch {
	case in.Status != "completed":
		icon = "❌"
	case in.DLQCount > 0 || in.Failed > 0:
		icon = "⚠️"
	}
	verb := "run"
	if in.Command == "retry" {
		verb = "redrive"
	}
	fmt.Fprintf(b, "%s %s %s — %s %s\n\n", level, icon, Escape(Truncate(title, 120)), verb, Escape(orDash(in.Status)))
	var ids []string
	if in.JobID != "" {
		ids = append(ids, "Job "+code(in.JobID))
	}
	if in.TraceID != "" {
		ids = append(ids, "trace "+code(in.TraceID))
	}
	if len(ids) > 0 {
		fmt.Fprintf(b, "%s\n\n", strings.Join(ids, " · "))
	}
	if in.Error != "" {
		fmt.Fprintf(b, "> **Error:** %s\n\n", Escape(Truncate(in.Error, 2000)))
	}
}

// storm writes the failure storm that stopped the job, if one did.
func storm(b *strings.Builder, in Input) {
	s := in.Storm
	if s == nil {
		return
	}
	ids := s.Items
	more := ""
	if len(ids) > 10 {
		ids, more = ids[:10], fmt.Sprintf(" and %d more", len(s.Items)-10)
	}
	cells := make([]string, len(ids))
	for i, id := range ids {
		cells[i] = Escape(Truncate(id, 80))
	}
	fmt.Fprintf(b, "> [!WARNING]\n> **Failure storm: launching stopped.** %d items in a row failed with %s (%s%s); %d item(s) were not started and stay pending.\n",
		s.Consecutive, Escape(Truncate(s.Signature, 200)), strings.Join(cells, ", "), more, in.Pending)
	if s.Continue != "" {
		fmt.Fprintf(b, "> After fixing the cause: %s\n", Escape(Truncate(s.Continue, 500)))
	}
	b.WriteString("\n")
}

func notices(b *strings.Builder, in Input) {
	for i, n := range in.Notices {
		if i == maxNotices {
			fmt.Fprintf(b, "> …and %d more notices\n", len(in.Notices)-i)
			break
		}
		fmt.Fprintf(b, "> [!NOTE]\n> %s\n\n", Escape(Truncate(n, 500)))
	}
}

func totals(b *strings.Builder, in Input) {
	b.WriteString("| Total | Merged | Failed | Skipped | Pending | In DLQ |\n|---:|---:|---:|---:|---:|---:|\n")
	fmt.Fprintf(b, "| %d | %d | %d | %d | %d | %d |\n\n", in.Total, in.Successful, in.Failed, in.Skipped, in.Pending, in.DLQCount)
	spend(b, in)
	branch(b, in)
}

// USD prints a dollar amount with two decimals, or up to four when it
// has them ($0.0246, not $0.02).
func USD(v float64) string {
	s := strconv.FormatFloat(math.Round(v*1e4)/1e4, 'f', 4, 64)
	for range 2 {
		s = strings.TrimSuffix(s, "0")
	}
	return s
}

// spend writes the job's cost (and budget, what the merged items cost,
// what failures cost, the cost per merged item) and its rate-limit
// cool-downs.
func spend(b *strings.Builder, in Input) {
	if in.CostUSD > 0 || in.MaxCostUSD > 0 {
		fmt.Fprintf(b, "Spend: **$%s**", USD(in.CostUSD))
		if in.MaxCostUSD > 0 {
			fmt.Fprintf(b, " of the $%s budget", USD(in.MaxCostUSD))
		}
		if in.CostUSD > 0 {
			fmt.Fprintf(b, " · merged items $%s · lost to failures $%s", USD(in.MergedCostUSD), USD(in.FailedCostUSD))
			if in.CostPerMergedUSD > 0 {
				fmt.Fprintf(b, " · **$%s per merged item**", USD(in.CostPerMergedUSD))
			}
		}
		b.WriteString("\n\n")
	}
	if in.FleetCooldowns > 0 {
		fmt.Fprintf(b, "Rate limits: %d fleet cool-down(s) (no agent started during them)\n\n", in.FleetCooldowns)
	}
}

func branch(b *strings.Builder, in Input) {
	if in.ResultsBranch == "" {
		return
	}
	state := "not pushed"
	if in.Pushed {
		state = "pushed"
	}
	fmt.Fprintf(b, "Results branch: %s (%s)\n\n", code(in.ResultsBranch), state)
}

func patterns(b *strings.Builder, groups []PatternGroup, max, cell int) {
	if len(groups) == 0 {
		return
	}
	b.WriteString("#### Failure patterns\n\n| Signature | Error type | Items | Examples |\n|---|---|---:|---|\n")
	n := min(len(groups), max)
	for _, g := range groups[:n] {
		ex := make([]string, 0, 3)
		for _, id := range g.Items[:min(len(g.Items), 3)] {
			ex = append(ex, Cell(id, 60))
		}
		fmt.Fprintf(b, "| %s | %s | %d | %s |\n", Cell(g.Signature, cell), Cell(g.ErrorType, 40), g.Count, orDash(strings.Join(ex, ", ")))
	}
	more(b, len(groups)-n, "run `prodigy-action dlq analyze` on the DLQ artifact")
	b.WriteString("\n")
}

func orphans(b *strings.Builder, in Input) {
	if len(in.Orphaned) == 0 {
		return
	}
	fmt.Fprintf(b, "#### Orphaned worktrees (%d)\n\nCleanup failed for these worktrees; the items themselves succeeded.\n\n", len(in.Orphaned))
	n := min(len(in.Orphaned), maxOrphanRows)
	for _, o := range in.Orphaned[:n] {
		fmt.Fprintf(b, "- %s (branch %s, item %s): %s\n", Cell(o.Path, 200), Cell(o.Branch, 100), Cell(o.ItemID, 80), Cell(o.Error, 200))
	}
	more(b, len(in.Orphaned)-n, "")
	if in.JobID != "" {
		fmt.Fprintf(b, "\nLocally: `prodigy-action worktree clean-orphaned %s`\n", shellWord(in.JobID))
	}
	b.WriteString("\n")
}

func artifact(b *strings.Builder, in Input) {
	a := in.Artifact
	if a == nil {
		return
	}
	name := code(a.Name)
	if a.URL != "" {
		name = fmt.Sprintf("[%s](%s)", Escape(a.Name), safeURL(a.URL))
	}
	fmt.Fprintf(b, "**DLQ artifact:** %s", name)
	if a.ID != 0 {
		fmt.Fprintf(b, " (id %d)", a.ID)
	}
	if a.ExpiresAt.IsZero() {
		b.WriteString(", kept for the repository's artifact retention period.\n\n")
	} else {
		fmt.Fprintf(b, ", expires %s; redrive before then.\n\n", a.ExpiresAt.UTC().Format("2006-01-02 15:04 UTC"))
	}
}

func redrive(b *strings.Builder, in Input) {
	r := in.Redrive
	if r == nil || in.DLQCount == 0 || r.RunID <= 0 || r.Workflow == "" {
		return
	}
	cmd := "gh workflow run " + shellWord(r.Workflow)
	if r.Repo != "" {
		cmd += " --repo " + shellWord(r.Repo)
	}
	if r.Ref != "" {
		cmd += " --ref " + shellWord(r.Ref)
	}
	cmd += " -f retry-from-run=" + strconv.FormatInt(r.RunID, 10)
	if r.Force {
		cmd += " -f retry-force=true"
	}
	fmt.Fprintf(b, "**Redrive the failed items:**\n\n```sh\n%s\n```\n\n", cmd)
}

// more writes "…and N more" when n > 0.
func more(b *strings.Builder, n int, hint string) {
	if n <= 0 {
		return
	}
	fmt.Fprintf(b, "\n…and %d more", n)
	if hint != "" {
		b.WriteString(" (" + hint + ")")
	}
	b.WriteString("\n")
}

func ineligible(it FailedItem) string {
	if it.ReprocessEligible {
		return ""
	}
	return " †"
}

func anyIneligible(items []FailedItem) bool {
	for _, it := range items {
		if !it.ReprocessEligible {
			return true
		}
	}
	return false
}

func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

// code renders an identifier we produced (job id, branch, artifact name)
// as a code span; characters that could end the span or the line are
// replaced, since such identifiers never legitimately contain them.
func code(s string) string {
	s = strings.Map(func(r rune) rune {
		if r == '`' || r == '\n' || r == '\r' || r == '|' || IsFormatChar(r) {
			return '_'
		}
		return r
	}, Truncate(s, 200))
	return "`" + s + "`"
}

// shellWord quotes s for a POSIX shell unless it is plainly safe, and
// drops characters that could break out of a fenced code block or make the
// command display differently from what it runs (format characters).
func shellWord(s string) string {
	s = strings.Map(func(r rune) rune {
		if r == '`' || r == '\n' || r == '\r' || IsFormatChar(r) {
			return -1
		}
		return r
	}, s)
	safe := s != ""
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:=@+,", r)) {
			safe = false
			break
		}
	}
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// safeURL keeps http(s) URLs and escapes characters that would end a
// markdown link destination; anything else becomes "#".
func safeURL(u string) string {
	if !strings.HasPrefix(u, "https://") && !strings.HasPrefix(u, "http://") {
		return "#"
	}
	return strings.NewReplacer(" ", "%20", "(", "%28", ")", "%29", "<", "%3C", ">", "%3E", "\n", "", "\r", "").Replace(u)
}
