// Command cpushim is bench/engine's CPU accounting shim (-split). Copies of
// it named git and bash sit first in PATH of a split run; each runs the real
// program of its name (the symlink real/<name> next to it) with the same
// arguments, standard streams and environment, waits for it and appends
// one line to cpu.log next to it:
//
//	name <TAB> pid <TAB> ppid <TAB> label <TAB> child user+sys s <TAB> shim user+sys s
//
// where label is git's subcommand ("commit", "merge-tree", …) or, for bash,
// "watchdog" or "step", child CPU is wait4's rusage of the real program (it
// and every descendant it waited for) and shim CPU is the shim's own. It
// exits with the program's exit code (128+signal when it was killed).
package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"time"
)

func main() {
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, "cpushim:", err)
		os.Exit(127)
	}
	dir, name := filepath.Dir(self), filepath.Base(self)
	ppid := os.Getppid() // now: a long-lived child outlives its parent
	cmd := exec.Command(filepath.Join(dir, "real", name), os.Args[1:]...)
	cmd.Args[0] = os.Args[0]
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	err = cmd.Run()
	code := 0
	var exitErr *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exitErr):
		code = exitErr.ExitCode()
		if st, ok := exitErr.Sys().(syscall.WaitStatus); ok && st.Signaled() {
			code = 128 + int(st.Signal())
		}
	default:
		fmt.Fprintln(os.Stderr, "cpushim:", err)
		os.Exit(127)
	}
	var child float64
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		child = seconds(ru)
	}
	var own syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &own)
	line := fmt.Sprintf("%s\t%d\t%d\t%s\t%.6f\t%.6f\n", name, os.Getpid(), ppid, label(name, os.Args[1:]), child, seconds(&own))
	if f, err := os.OpenFile(filepath.Join(dir, "cpu.log"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644); err == nil {
		_, _ = f.WriteString(line)
		_ = f.Close()
	}
	os.Exit(code)
}

// seconds is user+sys time of ru.
func seconds(ru *syscall.Rusage) float64 {
	d := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	return d.Seconds()
}

// label names what the program was asked to do: git's subcommand (after
// global options such as -C dir and -c key=value), or the kind of bash.
func label(name string, args []string) string {
	if name == "bash" {
		if slices.Contains(args, "prodigy-action-watchdog") {
			return "watchdog"
		}
		return "step"
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-C" || a == "-c" || a == "--git-dir" || a == "--work-tree" || a == "--namespace":
			i++
		case len(a) > 0 && a[0] == '-':
		default:
			return a
		}
	}
	return "(none)"
}
