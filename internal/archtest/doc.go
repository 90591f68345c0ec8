// Package archtest holds no code: its tests check the repository's
// architecture. The import graph of every non-test package (from `go list
// -deps -json ./...`) must follow the graph in arch_test.go (DESIGN.md's,
// except the departures listed there),
// and no package but gitops may start a git process. It is a CI gate
// (.ci/run runs the whole suite).
package archtest
