package runner

import (
	"errors"
	"fmt"

	"strings"

	"github.com/prodigy-action/prodigy-action/dlq"
	"github.com/prodigy-action/prodigy-action/internal/brief"
	"github.com/prodigy-action/prodigy-action/jobstore"
	"github.com/prodigy-action/prodigy-action/runner/event"
	"github.com/prodigy-action/prodigy-action/spend"
)

// ErrFailureStorm: the failure-storm breaker (error_policy.circuit_breaker)
// stopped launching items. It wraps ErrJobFailed; its exit code is
// ExitStorm.
var ErrFailureStorm = fmt.Errorf("%w: failure storm", ErrJobFailed)

// StatusStoppedByBreaker is the status of a job the breaker stopped.
const StatusStoppedByBreaker = jobstore.StatusStoppedByBreaker

// Storm is what tripped the failure-storm breaker (Result.Storm).
type Storm = spend.Storm

// observeFailure feeds a finished, failed item to the breaker and stops
// the job when it trips. A rate limit or overload says nothing about the
// items (the fleet cool-down holds those) and is not observed.
func (j *job) observeFailure(itemID string, t dlq.ErrorType, msg string) {
	if spend.LooksBusy(msg) {
		return
	}
	storm := j.breaker.Failed(itemID, dlq.Signature(t, msg))
	if storm == nil {
		return
	}
	pending := j.state.Counts().Pending
	j.events.Emit(event.BreakerTripped{Signature: storm.Signature, Items: storm.Items, Consecutive: storm.Limit, Pending: pending})
	j.stop(fmt.Sprintf("failure storm: %d items in a row failed with %s (error_policy.circuit_breaker)", storm.Limit, storm.Signature))
}

// stormError ends the map phase of a job the breaker stopped: it names
// the signature, the items that showed it and the commands that continue
// after the cause is fixed (a canary redrive of the cluster, then resume).
func (j *job) stormError(left int) error {
	s := j.breaker.Tripped()
	return fmt.Errorf("%w: %d items in a row failed with %s (%s); %d item(s) left pending, never started. "+
		"Fix the cause, check it on a canary with `dlq retry %s --signature %s --sample 1`, then `resume %s --include-dlq` runs the failed and the pending items",
		ErrFailureStorm, s.Limit, s.Signature, strings.Join(brief.FirstN(s.Items, 10), ", "), left, j.id, shellWord(s.Signature), j.id)
}

// shellWord quotes s for a POSIX shell when it needs it.
func shellWord(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r == '_' || r == '-' || r == '.' || r == ':' || r == '/' || (r >= '0' && r <= '9') || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z'))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// isStorm reports whether err is the breaker's.
func isStorm(err error) bool { return errors.Is(err, ErrFailureStorm) }
