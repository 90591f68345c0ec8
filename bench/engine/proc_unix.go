//go:build unix

package main

import (
	"os"
	"os/exec"
	"runtime"
	"syscall"
)

// maxRSSKB returns ru_maxrss of a finished process in KiB. wait4 reports it
// for the process and every descendant it waited for, as the largest single
// resident set among them, not their sum. It returns -1 if unknown.
func maxRSSKB(ps *os.ProcessState) int64 {
	ru, ok := ps.SysUsage().(*syscall.Rusage)
	if !ok || ru == nil {
		return -1
	}
	if runtime.GOOS == "darwin" { // bytes there, KiB on Linux and the BSDs
		return int64(ru.Maxrss) / 1024
	}
	return int64(ru.Maxrss)
}

// ownGroup runs cmd in its own process group and, when its context ends,
// interrupts the whole group (the CLI checkpoints on SIGINT; the baseline's
// xargs, bash and git processes die with it).
func ownGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGINT) }
}
