//go:build !linux

package main

import "errors"

// ownCPU is only implemented on Linux (it reads /proc).
func ownCPU(int) (self, children float64, err error) {
	return 0, 0, errors.New("the CPU split needs Linux's /proc")
}
