package dlq

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"
)

// maxSamples bounds PatternGroup.SampleItems.
const maxSamples = 3

// PatternGroup gathers the records that share an error_signature.
type PatternGroup struct {
	Signature string `json:"signature"`
	// ErrorType is the signature's type prefix ("Timeout", …).
	ErrorType string `json:"error_type"`
	Count     int    `json:"count"`
	// FirstOccurrence is the earliest first_attempt in the group.
	FirstOccurrence time.Time `json:"first_occurrence"`
	// LastOccurrence is the latest last_attempt in the group.
	LastOccurrence time.Time `json:"last_occurrence"`
	// SampleItems holds up to three item ids of the group, the smallest ids.
	SampleItems []string `json:"sample_items"`
	// SpendLostUSD is what the group's items cost (every attempt, as the
	// job's checkpoint recorded it): spend lost to this cause. Absent when
	// no cost is known (AnalyzeWithSpend).
	SpendLostUSD float64 `json:"spend_lost_usd,omitempty"`
}

// HourBucket counts records whose last_attempt falls in one UTC hour.
type HourBucket struct {
	Hour  time.Time `json:"hour"`
	Count int       `json:"count"`
}

// Analysis is the failure-pattern report of `dlq analyze`.
type Analysis struct {
	TotalItems int `json:"total_items"`
	// PatternGroups: one per error_signature, largest first, then by signature.
	PatternGroups []PatternGroup `json:"pattern_groups"`
	// ErrorDistribution counts every failure_history entry by error type.
	ErrorDistribution map[string]int `json:"error_distribution"`
	// TemporalDistribution counts records per UTC hour of last_attempt, ascending.
	TemporalDistribution []HourBucket `json:"temporal_distribution"`
}

// Analyze streams src once and groups its failures.
func Analyze(src Source) (Analysis, error) { return AnalyzeWithSpend(src, nil) }

// AnalyzeWithSpend is Analyze with each group's SpendLostUSD summed from
// cost (an item id's spend; nil: none known).
func AnalyzeWithSpend(src Source, cost func(itemID string) float64) (Analysis, error) {
	a := Analysis{ErrorDistribution: map[string]int{}, PatternGroups: []PatternGroup{}, TemporalDistribution: []HourBucket{}}
	groups := map[string]*PatternGroup{}
	hours := map[time.Time]int{}
	err := src.Each(func(d DeadLetteredItem) error {
		a.TotalItems++
		for _, f := range d.FailureHistory {
			a.ErrorDistribution[f.ErrorType.String()]++
		}
		hours[d.LastAttempt.UTC().Truncate(time.Hour)]++
		g := groups[d.ErrorSignature]
		if g == nil {
			typ, _, _ := strings.Cut(d.ErrorSignature, "::")
			g = &PatternGroup{Signature: d.ErrorSignature, ErrorType: typ,
				FirstOccurrence: d.FirstAttempt.UTC(), LastOccurrence: d.LastAttempt.UTC()}
			groups[d.ErrorSignature] = g
		}
		g.Count++
		if cost != nil {
			g.SpendLostUSD += cost(d.ItemID)
		}
		if d.FirstAttempt.Before(g.FirstOccurrence) {
			g.FirstOccurrence = d.FirstAttempt.UTC()
		}
		if d.LastAttempt.After(g.LastOccurrence) {
			g.LastOccurrence = d.LastAttempt.UTC()
		}
		g.SampleItems = addSample(g.SampleItems, d.ItemID)
		return nil
	})
	if err != nil {
		return Analysis{}, fmt.Errorf("dlq analyze: %w", err)
	}
	for _, g := range groups {
		g.SpendLostUSD = math.Round(g.SpendLostUSD*1e6) / 1e6
		a.PatternGroups = append(a.PatternGroups, *g)
	}
	sort.Slice(a.PatternGroups, func(i, j int) bool {
		gi, gj := a.PatternGroups[i], a.PatternGroups[j]
		if gi.Count != gj.Count {
			return gi.Count > gj.Count
		}
		return gi.Signature < gj.Signature
	})
	for h, n := range hours {
		a.TemporalDistribution = append(a.TemporalDistribution, HourBucket{Hour: h, Count: n})
	}
	sort.Slice(a.TemporalDistribution, func(i, j int) bool {
		return a.TemporalDistribution[i].Hour.Before(a.TemporalDistribution[j].Hour)
	})
	return a, nil
}

// addSample keeps the maxSamples smallest ids, sorted.
func addSample(s []string, id string) []string {
	i := sort.SearchStrings(s, id)
	if i >= maxSamples {
		return s
	}
	s = append(s, "")
	copy(s[i+1:], s[i:])
	s[i] = id
	if len(s) > maxSamples {
		s = s[:maxSamples]
	}
	return s
}
