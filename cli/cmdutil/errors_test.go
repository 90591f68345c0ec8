package cmdutil

import (
	"context"
	"io"
	"testing"
)

func TestExitCodeMapping(t *testing.T) {
	t.Parallel()
	tests := map[int]error{
		ExitOK:          nil,
		ExitUsage:       UsageErrorf("bad %s", "flag"),
		ExitFailed:      io.ErrUnexpectedEOF,
		ExitInterrupted: context.Canceled,
	}
	for want, err := range tests {
		if got := ExitCode(err); got != want {
			t.Errorf("ExitCode(%v) = %d, want %d", err, got, want)
		}
	}
}
