// Package retry computes backoff delays and runs an operation with retries.
//
// A Policy combines a Backoff strategy (Fixed, Linear, Exponential,
// Fibonacci, Custom) with the attempt count, the max_delay cap, optional
// jitter, retry_on matchers and a retry budget, exactly as the seed
// backoff-strategies.md and DESIGN.md ("Attempts and backoff") describe:
//
//	wait(k) = clamp(jitter(min(Backoff.Delay(k), MaxDelay)), 0, MaxDelay)
//
// where k >= 1 is the retry number (the wait before the (k+1)-th execution).
// The cap holds for every strategy, every k, with or without jitter.
//
// Do runs an operation under a Policy. Time and randomness are injected
// (Options.Clock, Options.Rand) so callers' tests never sleep; see package
// retrytest for a fake clock.
package retry
