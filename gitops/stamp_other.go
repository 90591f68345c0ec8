//go:build !linux

package gitops

import "io/fs"

// dirStampOf: directories are not remembered outside Linux (see
// cleanskip.go): every clean lists them all.
func dirStampOf(fs.FileInfo) (dirStamp, bool) { return dirStamp{}, false }

// stampsKept is false outside Linux.
func stampsKept(string) bool { return false }
