package main

import (
	"github.com/prodigy-action/prodigy-action/config"
	"github.com/prodigy-action/prodigy-action/runner"
)

// Placeholder mistakes (unknown variables, ${map.*} outside reduce, unsafe
// shell contexts, quoted here-documents) are found before anything runs,
// by validate and run alike.
func init() {
	validateExtra = append(validateExtra, func(wf *config.Workflow) []error {
		return runner.CheckInterpolation(wf)
	})
}
