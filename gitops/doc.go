// Package gitops is the git boundary of prodigy-action: no other package
// starts a git process or reads a repository's files.
//
// # What runs in-process and what runs git
//
// A [Client] wraps one repository (the user's checkout). Reads run
// in-process on go-git's object and ref storage (github.com/go-git/go-git/v5):
// HEAD of any worktree of the repository, branches and other refs (loose and
// packed), commits, trees, ancestry walks and commit trailers. That keeps
// the per-item hot path (an agent's HEAD before and after each step, its
// commits, the merge's ancestry check) free of process spawns.
//
// The git command line stays for everything that writes and for what go-git
// v5 does not do, or does not do compatibly with git running alongside:
//
//   - linked worktrees (`worktree add/remove/prune/list`): go-git has no
//     linked-worktree administration;
//   - checkout, reset and clean of a worktree: go-git's checkout runs no
//     .gitattributes filters (LFS, eol conversion), does not keep git's
//     index extensions (untracked cache, sparse index) and would have to
//     share the index with agents' own git;
//   - merges (`merge --no-ff`, `merge-tree --write-tree`): go-git v5 has no
//     three-way merge. [Client.MergeTree] merges in-process only where no
//     path changed on both sides and the merge base is known (inmerge.go),
//     writing the new trees and the merge commit as loose objects, as git
//     does (content-addressed files, safe alongside git); commits are left
//     to `commit-tree` when the environment fixes a date or the repository
//     signs commits;
//   - ref updates (`update-ref`): git's ref transactions (lock files,
//     reflogs, compare-and-swap) are the only locking protocol other git
//     processes honour, so refs are only ever moved by git;
//   - push and fetch (credential and proxy handling as the user's git has
//     it), `status` and `check-ref-format` (git's exact rules).
//
// Repositories go-git v5 cannot read (reftable refs, SHA-256 objects, an
// unknown repository extension) are served entirely by the git command line;
// any in-process read that cannot answer (an object missing from a partial
// clone, a read error) falls back to git for that call. Answers never
// differ, only their cost.
//
// # One environment for every git process
//
// Every git process a Client starts gets the same [Options]: the environment
// the caller supplied (by default [SafeEnv] of the process environment:
// PATH, HOME, locale, identity, git configuration variables, proxies — no
// tokens), extra configuration passed as GIT_CONFIG_* variables (never on
// the command line, never via os.Setenv), GIT_TERMINAL_PROMPT=0, and
// core.hooksPath pointing at [Options.HooksPath] (default [os.DevNull]), so
// no repository hook ever runs in the engine's git processes: an agent that
// plants .git/hooks/post-merge or reference-transaction in the shared git
// directory gets nothing from the engine. Agents' own git commands are not
// run by this package and keep the repository's hooks. core.fsmonitor is
// also forced off. Configuration an agent writes into .git/config can still
// name other programs git may start (merge drivers, gpg.program); those run
// with the same scrubbed environment, which is why it carries no secrets.
// Every method takes explicit directories and runs git as `git -C <dir>`,
// never relying on the process working directory, and variables that would
// redirect git to another repository (GIT_DIR, GIT_WORK_TREE, …) are
// removed.
//
// # Merges
//
// Two merge modes produce the same trees and detect the same conflicts:
//
//   - [Client.MergeNoFF] runs `git merge --no-ff` inside a worktree and aborts
//     on conflict, leaving HEAD, index and files as they were;
//   - [Client.MergeTree] touches no working tree: the merged tree (in-process
//     when no path changed on both sides, else `git merge-tree
//     --write-tree`), the merge commit (in-process, else `git commit-tree`)
//     and a compare-and-swap `git update-ref`. It is safe to call concurrently: only the ref update is
//     serialised, and a merge whose target moved is redone on the new tip.
//     A worktree that has the target branch checked out is brought up to
//     date later with [Client.SyncWorktree].
//
// Failures of git itself are returned as *[GitError]; merge conflicts as
// *[MergeConflictError], which matches [ErrMergeConflict] with errors.Is.
package gitops
