//go:build !linux

package gitops

import "io/fs"

// deletesInProcess is false outside Linux: file systems there commonly
// fold case or normalise names, which git (core.ignorecase,
// core.precomposeunicode) knows of and the in-process clean does not; it
// still finds a worktree with nothing to clean without running git.
const deletesInProcess = false

// dirStampOf: directories are not remembered outside Linux (see
// cleanskip.go): every clean lists them all.
func dirStampOf(fs.FileInfo) (dirStamp, bool) { return dirStamp{}, false }

// stampsKept is false outside Linux.
func stampsKept(string) bool { return false }
