// Package guard is a job's integrity check: agents share the repository
// (its refs and configuration) and the engine's user, so nothing stops one
// from moving the results branch or adding git configuration. What the
// engine guarantees instead is that such a change is found before anything
// is published:
//
//   - Results branch. The engine records the commit that holds each merged
//     item's work (CheckpointItem.MergeCommit) and the last tip it verified
//     or produced outside the map phase (Checkpoint.ResultsVerified: after
//     setup, before and after reduce). Guard.Check walks the branch's
//     first-parent chain: above ResultsVerified it may hold only the items'
//     merge commits, ResultsVerified must be on it, and every merged item's
//     merge must be on it. Otherwise the job fails, every merged item whose
//     merge is not at or below ResultsVerified goes back to pending, and
//     Result.ResultsTip stays empty: nothing is pushed.
//   - Configuration. The risky entries of the repository's git
//     configuration (gitops.AuditConfig: credential helpers, url rewrites,
//     proxies, drivers, includes, …) are read before agents run and again
//     before reduce and at the end; an entry added in between fails the
//     job the same way.
//
// The engine owns the transitions: a merged item found unverified goes
// back to pending through Guard.Unmerge, and the engine fails the job with
// the error Check returns.
package guard
