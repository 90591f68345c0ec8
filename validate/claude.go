package validate

import (
	"github.com/prodigy-action/prodigy-action/claudecode"
	"github.com/prodigy-action/prodigy-action/config"
)

// ClaudeStep is one claude step of a workflow and the Claude Code command
// line it runs.
type ClaudeStep struct {
	// Where is "setup", "map", "reduce" or "on_item_failure", with
	// " on_failure" for a step's handler.
	Where    string   `json:"where"`
	Position string   `json:"position"`
	Command  []string `json:"command"`
}

// claudeSteps lists every claude step of wf (handlers included) with its
// resolved command line.
func claudeSteps(wf *config.Workflow, o Options) []ClaudeStep {
	c := claudecode.Command{Path: o.ClaudeCommand, Args: o.ClaudeArgs, Workflow: wf.Claude, Overrides: o.Claude}
	if c.Path == "" {
		c.Path = "claude"
	}
	var out []ClaudeStep
	var walk func(where string, steps []config.Step)
	walk = func(where string, steps []config.Step) {
		for _, st := range steps {
			if st.Claude != "" {
				out = append(out, ClaudeStep{Where: where, Position: st.Pos.String(), Command: c.Line(st)})
			}
			walk(where+" on_failure", st.OnFailure)
		}
	}
	walk("setup", wf.Setup)
	walk("map", wf.Map.AgentTemplate)
	walk("on_item_failure", wf.ErrorPolicy.CustomHandler)
	walk("reduce", wf.Reduce)
	return out
}
