package actionapp

import (
	"context"
	"sync"
	"time"
)

// CancelBudget is how the Action spends the time GitHub gives a cancelled
// or timed-out step. GitHub sends the container SIGINT, then SIGTERM 7.5 s
// later, then SIGKILL 2.5 s after that. On the first signal (the context
// passed to Main ending) no item starts any more and the agents' process
// groups get SIGTERM at once; KillGrace later the ones still running get
// SIGKILL and become pending in the checkpoint (resumable). What finished
// is then published (DLQ artifact, comment, summary, outputs, push, shard
// output) under a deadline of Publish after the signal, and the workspace
// and RUNNER_TEMP go back to the runner's uid. Later signals never
// interrupt that (cmd/action ignores them in Action mode).
//
// The defaults end everything well before GitHub's SIGTERM: 2 s for the
// agents, publishing done 5.5 s after the signal, leaving 2 s for the
// ownership walk and slack before SIGTERM (and 4.5 s before SIGKILL).
type CancelBudget struct {
	// KillGrace is the agents' time between SIGTERM and SIGKILL after the
	// first signal; 0 means DefaultKillGrace.
	KillGrace time.Duration
	// Publish is the time from the first signal by which publishing
	// stops waiting (HTTP calls are cancelled; local files, the outputs
	// and the summary are still written); 0 means DefaultPublishBudget.
	Publish time.Duration
}

// Defaults of CancelBudget.
const (
	DefaultKillGrace     = 2 * time.Second
	DefaultPublishBudget = 5500 * time.Millisecond
)

// stopAgentsNow is the engine's interrupt grace in the Action: agents are
// told to stop (SIGTERM) as soon as the first signal arrives. (The
// engine's 0 means its 30 s default.)
const stopAgentsNow = time.Nanosecond

func (b CancelBudget) withDefaults() CancelBudget {
	if b.KillGrace <= 0 {
		b.KillGrace = DefaultKillGrace
	}
	if b.Publish <= 0 {
		b.Publish = DefaultPublishBudget
	}
	return b
}

// interrupt records when the context of the run ended (the first signal).
type interrupt struct {
	mu sync.Mutex
	at time.Time // zero until the context ended
}

// watch starts recording the moment ctx ends; the returned func stops it.
func (i *interrupt) watch(ctx context.Context) func() bool {
	return context.AfterFunc(ctx, func() {
		i.mu.Lock()
		defer i.mu.Unlock()
		i.at = time.Now()
	})
}

// when is the moment of the first signal, or false when none came.
func (i *interrupt) when() (time.Time, bool) {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.at, !i.at.IsZero()
}

// publishContext is the context of publishing: not cancelled by the
// signal that ended ctx (publishing is what the signal leaves time for),
// but cancelled budget after that signal — also when the signal comes
// while publishing is under way. stop releases it.
func publishContext(ctx context.Context, sig *interrupt, budget time.Duration) (pctx context.Context, stop func()) {
	pctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var timer *time.Timer
	var mu sync.Mutex
	stopWatch := context.AfterFunc(ctx, func() {
		at, ok := sig.when()
		if !ok {
			at = time.Now()
		}
		mu.Lock()
		defer mu.Unlock()
		timer = time.AfterFunc(time.Until(at.Add(budget)), cancel)
	})
	return pctx, func() {
		stopWatch()
		mu.Lock()
		if timer != nil {
			timer.Stop()
		}
		mu.Unlock()
		cancel()
	}
}
