//go:build unix

package main

import (
	"os"
	"os/exec"
	"runtime"
	"syscall"
	"time"
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

// cpuUsed is the CPU time (user + system) of the child processes this
// process waited for so far (getrusage RUSAGE_CHILDREN): the difference
// over a span is what the git processes of the span cost. This process's
// own CPU is left out: the benchmark's goroutines and collector are not
// the floor.
func cpuUsed() time.Duration {
	var kids syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &kids)
	tv := func(t syscall.Timeval) time.Duration { return time.Duration(t.Nano()) }
	return tv(kids.Utime) + tv(kids.Stime)
}

// fsType names the file system holding dir: "tmpfs" or "disk" (anything
// else), as the yardstick reports it.
func fsType(dir string) string {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err == nil && st.Type == 0x01021994 { // TMPFS_MAGIC
		return "tmpfs"
	}
	return "disk"
}
