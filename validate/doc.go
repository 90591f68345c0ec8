// Package validate is the static analysis of a workflow before anything
// runs, shared by `validate`, `run`, the sharding commands and the GitHub
// Action: File and Workflow check what config's parsing leaves to other
// packages (the items pipeline, placeholders and their shell contexts, the
// retry config, likely typos of environment variables) and resolve the map
// phase's retry policy, its waits and worst case, and the Claude Code
// command line of every claude step. A Result's JSON form is the output of
// `validate --json`, a CLI contract.
//
// The rules that analysis stands on are the engine's rules too, so the
// engine (runner) calls them rather than repeating them: Interpolation
// (checked again before a job starts), ItemOptions and ItemRetryConfig (how
// the map phase reads its items and retries them), RetryPolicy (a retry
// config as a retry.Policy), ItemFields (fields the agent template reads
// that no loaded item has, checked as the items load), Checkout (what of
// the user's uncommitted changes agents will not see, given the checkout's
// status) and NoItems (why a map phase selected no item).
//
// Nothing here starts a process, reads the map input or writes a file.
// File, Workflow and the rules are safe for concurrent use (an ItemFields
// is not). An invalid workflow's error (Result.Err) is an *Error: exit 2,
// nothing was run.
package validate
