package dlq

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"reflect"
	"testing"
	"time"
)

// seedStatsItems mirrors the seed's statistics example: 5 items, 3
// eligible, 2 needing review, two signatures.
func seedStatsItems() Items {
	mk := func(id string, minutes int, t ErrorType, msg string, failures int) DeadLetteredItem {
		var fs []Failure
		for i := range failures {
			fs = append(fs, Failure{At: base.Add(time.Duration(minutes+i) * time.Minute), Type: &t, Message: msg})
		}
		return *FromAgentResult(AgentResult{ItemID: id, Status: StatusFailed, Failures: fs})
	}
	return Items{
		mk("item-1", 0, ErrorType{Kind: Timeout}, "Command exceeded 300 second timeout", 1),
		mk("item-2", 60, ErrorType{Kind: Timeout}, "Command exceeded 120 second timeout", 2),
		mk("item-3", 120, CommandFailedWith(1), "exit code 1", 3),
		mk("item-4", 61, ErrorType{Kind: ValidationFailed}, "exit code 1", 1),
		mk("item-5", 62, ErrorType{Kind: CommitValidationFailed}, "exit code 1", 1),
	}
}

func TestStats(t *testing.T) {
	st, err := Stats(seedStatsItems())
	if err != nil {
		t.Fatal(err)
	}
	if st.TotalItems != 5 || st.EligibleForReprocess != 3 || st.RequiringManualReview != 2 {
		t.Errorf("counts = %+v", st)
	}
	if !st.OldestItem.Equal(base) || !st.NewestItem.Equal(base.Add(122*time.Minute)) {
		t.Errorf("oldest/newest = %v/%v", st.OldestItem, st.NewestItem)
	}
	wantCats := map[string]int{"Timeout::Command exceeded timeout": 2, "CommandFailed::exit code": 1,
		"ValidationFailed::exit code": 1, "CommitValidationFailed::exit code": 1}
	if !reflect.DeepEqual(st.ErrorCategories, wantCats) {
		t.Errorf("error_categories = %v", st.ErrorCategories)
	}
	if !reflect.DeepEqual(st.ByErrorType, map[string]int{"Timeout": 2, "CommandFailed": 1, "ValidationFailed": 1, "CommitValidationFailed": 1}) {
		t.Errorf("by_error_type = %v", st.ByErrorType)
	}
	if st.AverageFailureCount != 8.0/5 {
		t.Errorf("average = %v", st.AverageFailureCount)
	}
	empty, err := Stats(Items{})
	b, _ := json.Marshal(empty)
	if err != nil || string(b) != `{"total_items":0,"eligible_for_reprocess":0,"requiring_manual_review":0,"oldest_item":null,"newest_item":null,"error_categories":{},"by_error_type":{},"average_failure_count":0}` {
		t.Errorf("empty stats = %s, %v", b, err)
	}
}

func TestAnalyze(t *testing.T) {
	a, err := Analyze(seedStatsItems())
	if err != nil {
		t.Fatal(err)
	}
	if a.TotalItems != 5 || len(a.PatternGroups) != 4 {
		t.Fatalf("analysis = %+v", a)
	}
	g := a.PatternGroups[0]
	if g.Signature != "Timeout::Command exceeded timeout" || g.ErrorType != "Timeout" || g.Count != 2 ||
		!reflect.DeepEqual(g.SampleItems, []string{"item-1", "item-2"}) || !g.FirstOccurrence.Equal(base) || !g.LastOccurrence.Equal(base.Add(61*time.Minute)) {
		t.Errorf("first group = %+v", g)
	}
	// error_distribution counts every failed attempt (1+2+3+1+1).
	if !reflect.DeepEqual(a.ErrorDistribution, map[string]int{"Timeout": 3, "CommandFailed": 3, "ValidationFailed": 1, "CommitValidationFailed": 1}) {
		t.Errorf("error_distribution = %v", a.ErrorDistribution)
	}
	want := []HourBucket{{base, 1}, {base.Add(time.Hour), 3}, {base.Add(2 * time.Hour), 1}}
	if !reflect.DeepEqual(a.TemporalDistribution, want) {
		t.Errorf("temporal = %+v", a.TemporalDistribution)
	}
	if got := addSample([]string{"b", "d", "f"}, "a"); !reflect.DeepEqual(got, []string{"a", "b", "d"}) {
		t.Errorf("addSample = %v", got)
	}
}

func TestList(t *testing.T) {
	items := seedStatsItems()
	tests := []struct {
		name    string
		o       ListOptions
		want    []string
		matched int
	}{
		{"all_newest_first_ties_by_id", ListOptions{}, []string{"item-3", "item-5", "item-2", "item-4", "item-1"}, 5},
		{"limit", ListOptions{Limit: 2}, []string{"item-3", "item-5"}, 5},
		{"eligible", ListOptions{EligibleOnly: true}, []string{"item-3", "item-2", "item-1"}, 3},
		{"eligible_limit", ListOptions{EligibleOnly: true, Limit: 1}, []string{"item-3"}, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rows, matched, err := List(items, tt.o)
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, r := range rows {
				ids = append(ids, r.ItemID)
			}
			if !reflect.DeepEqual(ids, tt.want) || matched != tt.matched {
				t.Errorf("List = %v (%d matched), want %v (%d)", ids, matched, tt.want, tt.matched)
			}
		})
	}
}

func TestExportJSONAndCSV(t *testing.T) {
	items := seedStatsItems()
	var buf bytes.Buffer
	n, err := ExportJSON(&buf, items)
	if err != nil || n != 5 {
		t.Fatalf("ExportJSON = %d, %v", n, err)
	}
	var back []DeadLetteredItem
	if err := json.Unmarshal(buf.Bytes(), &back); err != nil {
		t.Fatalf("export is not a JSON array: %v\n%s", err, buf.Bytes())
	}
	for i := range back {
		want, _ := Encode(items[i])
		got, _ := Encode(back[i])
		if !bytes.Equal(want, got) {
			t.Errorf("record %d changed in export", i)
		}
	}
	buf.Reset()
	if n, err := ExportJSON(&buf, Items{}); n != 0 || err != nil || buf.String() != "[]\n" {
		t.Errorf("empty export = %q, %v", buf.String(), err)
	}
	buf.Reset()
	if n, err := ExportCSV(&buf, items); n != 5 || err != nil {
		t.Fatalf("ExportCSV = %d, %v", n, err)
	}
	rows, err := csv.NewReader(&buf).ReadAll()
	if err != nil || len(rows) != 6 || !reflect.DeepEqual(rows[0], CSVHeader) {
		t.Fatalf("csv rows = %q, %v", rows, err)
	}
	if r := rows[3]; r[0] != "item-3" || r[1] != "item-3" || r[2] != "CommandFailed" || r[3] != "1" || r[4] != "3" || r[16] != "null" {
		t.Errorf("item-3 row = %q", r)
	}
	if r := rows[1]; r[3] != "" || r[9] != "true" || r[10] != "false" {
		t.Errorf("item-1 row = %q", r)
	}
}
