package validate

import (
	"fmt"
	"maps"
	"slices"

	"github.com/prodigy-action/prodigy-action/config"
	"github.com/prodigy-action/prodigy-action/interp"
)

// Interpolation finds the placeholder mistakes of a workflow that can
// be known before anything runs, each as "file:line:col: message": unknown
// variable roots (${itme.name}), ${map.*} outside reduce, placeholders in
// quoted here-documents, in variable-name contexts or in a second shell's
// script (unless the step sets allow_nested_shell), and shell scripts with
// placeholders that do not parse. Both `validate` and `run` call it (run
// through Run's preparation), so a workflow it rejects never starts.
func Interpolation(wf *config.Workflow) []error {
	base := interp.Scope{}
	for k := range wf.Env {
		base = append(base, k)
	}
	base = append(base, captures(wf.Setup)...)
	mapScope := append(append(interp.Scope{}, base...), "item", "item_id", "item_index", "item_total", "attempt")
	mapScope = append(mapScope, captures(wf.Map.AgentTemplate)...)
	reduceScope := append(append(interp.Scope{}, base...), "map.total", "map.successful", "map.failed", "map.skipped", "map.results")
	reduceScope = append(reduceScope, captures(wf.Reduce)...)
	handlerScope := append(append(interp.Scope{}, mapScope...), "error")
	handlerScope = append(handlerScope, captures(wf.ErrorPolicy.CustomHandler)...)

	var errs []error
	check := func(steps []config.Step, scope interp.Scope) {
		walkSteps(steps, func(st config.Step) {
			errs = append(errs, checkStep(st, scope)...)
			errs = append(errs, envTypos(wf, st, scope)...)
		})
	}
	check(wf.Setup, base)
	check(wf.Map.AgentTemplate, mapScope)
	check(wf.ErrorPolicy.CustomHandler, handlerScope)
	check(wf.Reduce, reduceScope)
	return errs
}

// checkStep checks one step's texts against its scope.
func checkStep(st config.Step, scope interp.Scope) []error {
	var errs []error
	at := func(p config.Position, e *interp.ScriptError) {
		errs = append(errs, fmt.Errorf("%s: %w", p, e.Err))
	}
	switch {
	case st.Shell != "":
		for _, e := range interp.CheckShell(st.Shell, scope, interp.ShellOptions{AllowNestedShell: st.AllowNestedShell}) {
			at(st.TextPosition(e.Line, e.Col), e)
		}
	case st.Claude != "":
		for _, e := range interp.CheckText(st.Claude, scope) {
			at(st.TextPosition(e.Line, e.Col), e)
		}
	case st.WriteFile != nil:
		for _, e := range interp.CheckText(st.WriteFile.Path, scope) {
			at(st.Pos, &interp.ScriptError{Err: fmt.Errorf("write_file path: %w", e.Err)})
		}
		for _, e := range interp.CheckText(st.WriteFile.Content, scope) {
			at(st.Pos, &interp.ScriptError{Err: fmt.Errorf("write_file content line %d: %w", e.Line, e.Err)})
		}
	}
	for _, k := range slices.Sorted(maps.Keys(st.Env)) {
		for _, e := range interp.CheckText(st.Env[k], scope) {
			p, ok := st.EnvPos[k]
			if !ok {
				p = st.Pos
			}
			at(p, &interp.ScriptError{Err: fmt.Errorf("env %s: %w", k, e.Err)})
		}
	}
	return errs
}

// walkSteps calls fn for every step and, recursively, its on_failure steps.
func walkSteps(steps []config.Step, fn func(config.Step)) {
	for _, st := range steps {
		fn(st)
		walkSteps(st.OnFailure, fn)
	}
}

// captures lists the capture_output variable names of steps.
func captures(steps []config.Step) []string {
	var out []string
	walkSteps(steps, func(st config.Step) {
		if st.CaptureOutput != "" {
			out = append(out, st.CaptureOutput)
		}
	})
	return out
}
