package dlq

import (
	"fmt"
	"os"
	"testing"
	"time"
)

// populate writes n records straight into items/ (no fsync) and lets the
// store rebuild its index, as after a crash.
func populate(b *testing.B, s *Store, n int) {
	b.Helper()
	if err := os.MkdirAll(s.itemsDir, 0o755); err != nil {
		b.Fatal(err)
	}
	for i := range n {
		d := rec(fmt.Sprintf("item-%06d", i), i%1440)
		data, _ := Encode(d)
		if err := os.WriteFile(s.ItemPath(d.ItemID), data, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	if c, err := s.Count(); err != nil || c != n {
		b.Fatalf("Count = %d, %v", c, err)
	}
}

func BenchmarkAdd(b *testing.B) {
	for _, tc := range []struct {
		n     int
		delay time.Duration
	}{{0, 0}, {10000, 0}, {0, -1}, {10000, -1}} {
		b.Run(fmt.Sprintf("existing=%d/flush_delay=%v", tc.n, tc.delay), func(b *testing.B) {
			n := tc.n
			s, _ := Open(b.TempDir(), "job-1", Options{Capacity: -1, FlushDelay: tc.delay, Warn: func(string) {}})
			defer s.Close()
			populate(b, s, n)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := s.Add(rec(fmt.Sprintf("new-%d", i), i)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
