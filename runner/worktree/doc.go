// Package worktree is the engine's worktree pool: the agents' worktrees of
// one job — a pool of reused slots (reset per item, so only changed files
// are rewritten) or one fresh worktree per attempt — and the job's parent
// worktree, all checked out the same way (sparse or whole), cleaned up
// after each attempt and torn down at the end, now or deferred past the
// result (Detach).
//
// A Pool gets everything it uses when it is built (Deps): the git client,
// the job's paths and branch, the clock of its cleanup retries, and a
// Reporter, the functions through which it tells the job what it made,
// cleaned, could not remove (orphans) and which agent branches to delete.
// A cleanup failure is never an error of the item: it is reported and the
// attempt's CleanupStatus says so (spec 136).
package worktree
