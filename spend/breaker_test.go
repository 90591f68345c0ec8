package spend

import (
	"fmt"
	"slices"
	"sync"
	"testing"
)

func TestBreakerTripsOnARunOfOneSignature(t *testing.T) {
	b := &Breaker{Limit: 3}
	steps := []struct {
		item, sig string // sig "": a success
		trips     bool
	}{
		{"a", "CommandFailed::npm ERR registry", false},
		{"b", "CommandFailed::npm ERR registry", false},
		{"c", "", false}, // a success breaks the run
		{"d", "CommandFailed::npm ERR registry", false},
		{"e", "Timeout::step timed out", false}, // another cause starts a new run
		{"f", "CommandFailed::npm ERR registry", false},
		{"g", "CommandFailed::npm ERR registry", false},
		{"h", "CommandFailed::npm ERR registry", true},
		{"i", "CommandFailed::npm ERR registry", false}, // trips once
	}
	for _, s := range steps {
		var storm *Storm
		if s.sig == "" {
			b.Succeeded()
		} else {
			storm = b.Failed(s.item, s.sig)
		}
		if (storm != nil) != s.trips {
			t.Fatalf("after %s: storm %+v, want trip %v", s.item, storm, s.trips)
		}
	}
	got := b.Tripped()
	if got == nil || got.Signature != "CommandFailed::npm ERR registry" || !slices.Equal(got.Items, []string{"f", "g", "h"}) || got.Limit != 3 {
		t.Fatalf("storm = %+v", got)
	}
}

func TestBreakerOffAndConcurrent(t *testing.T) {
	var nilBreaker *Breaker
	nilBreaker.Succeeded()
	if nilBreaker.Failed("a", "x") != nil || nilBreaker.Tripped() != nil {
		t.Fatal("a nil breaker tripped")
	}
	off := &Breaker{Limit: 0}
	for i := range 100 {
		if off.Failed(fmt.Sprint(i), "x") != nil {
			t.Fatal("a breaker with limit 0 tripped")
		}
	}
	b := &Breaker{Limit: 50}
	var wg sync.WaitGroup
	trips := make(chan *Storm, 200)
	for i := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if s := b.Failed(fmt.Sprint(i), "same"); s != nil {
				trips <- s
			}
		}()
	}
	wg.Wait()
	close(trips)
	if n := len(trips); n != 1 {
		t.Fatalf("tripped %d times, want once", n)
	}
}
