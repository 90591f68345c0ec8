// Package spend keeps a fleet of agents within what it may spend and off
// a provider that is pushing back:
//
//   - Budget: the job budget and per-item reservations (an item starts only
//     when its reservation fits; unspent parts are released).
//   - ItemSpend: one item's spend in a run, the Claude Code flag that caps a
//     step (--max-budget-usd), and its attempt's rate-limit signal.
//   - ScanClaudeRun: a claude step's stream-json transcript read for cost,
//     tokens and provider errors; a cost that cannot be trusted fails
//     closed (it counts as all that was left), provider delays are bounded.
//   - Cooldown: the fleet-wide rate-limit cool-down (no agent starts while
//     it is on).
//   - Breaker: the failure-storm breaker, which stops launching items once
//     recent failures share one cause.
//
// It imports no project package: outcomes, costs and signatures in,
// decisions out; the engine (runner) turns them into events and states.
package spend
