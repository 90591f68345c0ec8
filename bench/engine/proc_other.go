//go:build !unix

package main

import (
	"os"
	"os/exec"
)

// maxRSSKB returns -1: peak RSS is only measured on unix systems.
func maxRSSKB(*os.ProcessState) int64 { return -1 }

// ownGroup leaves cmd unchanged: process groups are a unix feature.
func ownGroup(*exec.Cmd) {}
