// Package gitops is the only place in prodigy-action that runs git.
//
// A [Client] wraps one repository (the user's checkout) and runs the git
// command line for everything that writes: linked worktrees (add, reset for
// reuse, remove, prune), branches, merges and status text. Cheap reads that
// sit on the hot path (resolving a branch, the HEAD of a worktree) are served
// in-process from the loose and packed refs when that is unambiguous, and fall
// back to git otherwise.
//
// Every method takes explicit directories and runs git as `git -C <dir>`,
// never relying on the process working directory. Every git process gets
// GIT_TERMINAL_PROMPT=0 and an environment stripped of variables that would
// redirect git to another repository (GIT_DIR, GIT_WORK_TREE, …).
//
// Two merge modes produce the same trees and detect the same conflicts:
//
//   - [Client.MergeNoFF] runs `git merge --no-ff` inside a worktree and aborts
//     on conflict, leaving HEAD, index and files as they were;
//   - [Client.MergeTree] touches no working tree: `git merge-tree --write-tree`,
//     `git commit-tree` and a compare-and-swap `git update-ref`. A worktree
//     that has the target branch checked out is brought up to date later with
//     [Client.SyncWorktree].
//
// Failures of git itself are returned as *[GitError]; merge conflicts as
// *[MergeConflictError], which matches [ErrMergeConflict] with errors.Is.
package gitops
