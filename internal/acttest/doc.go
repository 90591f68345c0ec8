// Package acttest is a test-only module: it runs nektos/act's in-process v4
// artifact server and exercises the ghaction artifact client against it, so
// act's large dependency graph stays out of the main module's go.mod.
//
// Run with: cd internal/acttest && go test ./...
package acttest
