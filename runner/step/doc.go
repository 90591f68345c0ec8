// Package step runs a workflow's steps — shell (through bash, placeholders
// passed as variables, never as code), claude (Claude Code without a
// shell, its transcript redacted and bounded as it is written, its cost
// accounted and failing closed) and write_file (inside the worktree, never
// through a link out of it) — each in a process group of its own with its
// timeout, its on_failure handler and its retries (Runner, Context,
// Failure). The engine (runner) gives a Runner what it uses when it builds
// it and a Context per phase or attempt; a Failure says why a step, and so
// the attempt, failed, classified as the DLQ records it.
package step
