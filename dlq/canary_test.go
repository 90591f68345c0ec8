package dlq

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// canaryStore holds four records of signature "a" (one of them not
// reprocess-eligible) and one of "b".
func canaryStore(t *testing.T) *Store {
	t.Helper()
	s := openTest(t, t.TempDir(), Options{})
	for i, id := range []string{"i4", "i2", "i1", "i3", "j1"} {
		r := rec(id, i)
		r.ErrorSignature = "a"
		if id == "j1" {
			r.ErrorSignature = "b"
		}
		r.ReprocessEligible = id != "i3"
		if _, err := s.Add(r); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// The sample is the first N eligible records by item id, whatever the
// store's order; --force takes the ineligible too.
func TestPlanCanarySplitsByItemID(t *testing.T) {
	s := canaryStore(t)
	plan, why, err := PlanCanary(s, "job-1", "a", 2, false)
	if err != nil || why != "" {
		t.Fatal(err, why)
	}
	if !reflect.DeepEqual(plan, &CanaryPlan{Signature: "a", Sample: []string{"i1", "i2"}, Rest: []string{"i4"}}) {
		t.Fatalf("plan = %+v", plan)
	}
	plan, _, _ = PlanCanary(s, "job-1", "a", 10, true)
	if !reflect.DeepEqual(plan.Sample, []string{"i1", "i2", "i3", "i4"}) || len(plan.Rest) != 0 {
		t.Fatalf("forced plan = %+v", plan)
	}
	if n, err := CountSignature(s, "a", []string{"i1", "j1", "zz"}); err != nil || n != 1 {
		t.Fatalf("CountSignature = %d, %v; want 1", n, err)
	}
}

// Nothing selected: an empty plan (JSON arrays, not null) and a reason
// that lists every signature with its eligible/total counts.
func TestPlanCanarySaysWhyNothingIsSelected(t *testing.T) {
	s := canaryStore(t)
	for _, c := range []struct{ sig, want string }{
		{"zz", `--signature "zz" matches no DLQ record of job job-1`},
	} {
		plan, why, err := PlanCanary(s, "job-1", c.sig, 1, false)
		if err != nil {
			t.Fatal(err)
		}
		if b, _ := json.Marshal(plan); !strings.Contains(string(b), `"sample":[],"rest":[]`) {
			t.Errorf("empty plan encodes as %s", b)
		}
		if !strings.Contains(why, c.want) || !strings.Contains(why, `"a" 3/4`) || !strings.Contains(why, `"b" 1/1`) {
			t.Errorf("why = %q; want %q and every signature's counts", why, c.want)
		}
	}
	r := rec("k1", 9)
	r.ErrorSignature, r.ReprocessEligible = "c", false
	if _, err := s.Add(r); err != nil {
		t.Fatal(err)
	}
	if _, why, _ := PlanCanary(s, "job-1", "c", 1, false); !strings.Contains(why, "add --force") {
		t.Errorf("why = %q; want the --force hint", why)
	}
	empty := openTest(t, t.TempDir(), Options{})
	if _, why, _ := PlanCanary(empty, "job-1", "a", 1, false); !strings.Contains(why, "has no DLQ records") {
		t.Errorf("why = %q for an empty DLQ", why)
	}
}

// FilterEnv sets exactly FilterFields of the record's own (with a failure
// history) besides the item data's fields, and the record wins a clash.
func TestFilterEnvIsFilterFieldsAndTheData(t *testing.T) {
	r := rec("i1", 0)
	r.ItemData = json.RawMessage(`{"path":"a.go","item_id":"forged"}`)
	env := FilterEnv(r)
	var own []string
	for k := range env {
		if k != "path" {
			own = append(own, k)
		}
	}
	slices.Sort(own)
	want := slices.Clone(FilterFields)
	slices.Sort(want)
	if !slices.Equal(own, want) {
		t.Fatalf("FilterEnv's own names %v, FilterFields %v", own, want)
	}
	if env["item_id"] != "i1" || env["path"] != "a.go" {
		t.Fatalf("env = %v", env)
	}
}
