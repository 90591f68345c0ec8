package jobcmd

import (
	"io"
	"testing"

	"github.com/prodigy-action/prodigy-action/cli/cmdutil"
	"github.com/prodigy-action/prodigy-action/runner"
)

// BenchmarkStatusJSON compares the streamed `status --json` with encoding
// runner.Status's whole result, at 100,000 items.
func BenchmarkStatusJSON(b *testing.B) {
	home := b.TempDir()
	id := statusJob(b, home, 100000)
	b.Run("streamed", func(b *testing.B) {
		for b.Loop() {
			if err := writeStatusJSON(io.Discard, home, id); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("whole", func(b *testing.B) {
		for b.Loop() {
			res, err := runner.Status(home, id)
			if err != nil {
				b.Fatal(err)
			}
			if err := cmdutil.WriteJSON(io.Discard, res); err != nil {
				b.Fatal(err)
			}
		}
	})
}
