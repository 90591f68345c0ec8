package main

import "testing"

func TestParseStatCPU(t *testing.T) {
	line := []byte("42 (a (b) c) S 1 42 42 0 -1 4194304 100 0 0 0 150 25 300 75 20 0 1 0 1000 0 0")
	self, children, err := parseStatCPU(line)
	if err != nil || self != 1.75 || children != 3.75 {
		t.Errorf("parseStatCPU = %v, %v, %v; want 1.75, 3.75", self, children, err)
	}
}
