package main

import (
	"os"
	"testing"
)

// TestMain lets tests run the real CLI as a separate process (for kill -9
// and signal tests): the test binary re-executes itself with
// PRODIGY_ACTION_TEST_MAIN=1 and behaves as the `action` command.
func TestMain(m *testing.M) {
	if os.Getenv("PRODIGY_ACTION_TEST_MAIN") == "1" {
		installFaultHook() // crash_test.go: PRODIGY_TEST_FAULT
		main()
		return
	}
	os.Exit(m.Run())
}
