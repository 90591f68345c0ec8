//go:build !unix

package items

import "os/exec"

// setProcessGroup is a no-op where process groups do not exist; context
// cancellation kills the direct child only.
func setProcessGroup(*exec.Cmd) {}
