// Package archtest holds no code: its tests check the repository's
// architecture against DESIGN.md. The import graph of every non-test
// package (from `go list -deps -json ./...`) must follow the package DAG,
// and no package but gitops may start a git process. It is a CI gate
// (.ci/run runs the whole suite).
package archtest
