//go:build linux

package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat times (100 on every
// Linux architecture Go supports).
const clockTicks = 100

// ownCPU waits until process pid has exited without reaping it (waitid
// WNOWAIT) and reads its /proc stat: self is its own user+sys time, children
// the user+sys time of the descendants it waited for (cutime+cstime). The
// caller reaps it afterwards (exec.Cmd.Wait).
func ownCPU(pid int) (self, children float64, err error) {
	var info unix.Siginfo
	for {
		err = unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
		return 0, 0, fmt.Errorf("waitid %d: %w", pid, err)
	}
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, err
	}
	return parseStatCPU(data)
}

// parseStatCPU returns utime+stime and cutime+cstime, in seconds, of a
// /proc/<pid>/stat line ("pid (comm) state … utime stime cutime cstime …";
// fields counted after the last ')', since comm may hold anything).
func parseStatCPU(data []byte) (self, children float64, err error) {
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0, 0, errors.New("malformed /proc stat")
	}
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 15 {
		return 0, 0, errors.New("short /proc stat")
	}
	var t [4]float64
	for k := range t {
		v, err := strconv.ParseInt(f[11+k], 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("malformed /proc stat: %w", err)
		}
		t[k] = float64(v) / clockTicks
	}
	return t[0] + t[1], t[2] + t[3], nil
}
