//go:build !unix

package main

import (
	"os"
	"os/exec"
	"time"
)

// maxRSSKB returns -1: peak RSS is only measured on unix systems.
func maxRSSKB(*os.ProcessState) int64 { return -1 }

// ownGroup leaves cmd unchanged: process groups are a unix feature.
func ownGroup(*exec.Cmd) {}

// cpuUsed is 0 where getrusage is not available: the yardstick is then
// not measured.
func cpuUsed() time.Duration { return 0 }

// fsType is "disk" outside unix.
func fsType(string) string { return "disk" }
