// Package ghworkflows holds tests of the repository's GitHub workflows,
// action.yml and release configuration, checking the rules GitHub itself
// enforces (and act and actionlint do not). It has no code of its own.
package ghworkflows
