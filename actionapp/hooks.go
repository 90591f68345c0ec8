package actionapp

import (
	"fmt"
	"io"
	"sync"

	"github.com/sethvargo/go-githubactions"

	"github.com/prodigy-action/prodigy-action/ghaction"
	"github.com/prodigy-action/prodigy-action/redact"
	"github.com/prodigy-action/prodigy-action/runner"
)

// actionHooks turns runner callbacks into GitHub log groups and
// annotations. Calls come from many goroutines; the mutex keeps each
// group's lines together. The item's log is untrusted: it is echoed with
// workflow commands stopped (ghaction.EchoUntrusted) to out, the writer
// of gha.
type actionHooks struct {
	mu     sync.Mutex
	gha    *githubactions.Action
	out    io.Writer
	redact *redact.Redactor
}

func (h *actionHooks) ItemFinished(it runner.ItemOutcome, log string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.gha.Group(fmt.Sprintf("item %s: %s (%d attempt(s))", h.redact.String(it.ItemID), it.State, it.Attempts))
	if err := ghaction.EchoUntrusted(h.out, h.redact.String(log)); err != nil {
		h.gha.Warningf("echo the log of item %s: %s", h.redact.String(it.ItemID), err)
	}
	h.gha.EndGroup()
	switch it.State {
	case runner.ItemDLQ:
		h.gha.WithFieldsMap(map[string]string{"title": "item " + h.redact.String(it.ItemID)}).
			Errorf("%s after %d attempt(s): %s", orUnknown(it.ErrorType), it.Attempts, h.redact.String(it.Error))
	case runner.ItemSkipped:
		h.gha.WithFieldsMap(map[string]string{"title": "item " + h.redact.String(it.ItemID)}).
			Warningf("skipped: %s", h.redact.String(it.Error))
	}
}

func (h *actionHooks) Warning(msg string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.gha.Warningf("%s", h.redact.String(msg))
}

func orUnknown(s string) string {
	if s == "" {
		return "Unknown"
	}
	return s
}
