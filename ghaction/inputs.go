package ghaction

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/sethvargo/go-githubactions"
)

// CommentMode says when the sticky PR comment is posted.
type CommentMode string

// Comment modes (the `comment` input).
const (
	CommentAlways    CommentMode = "always"
	CommentOnFailure CommentMode = "on-failure"
	CommentNever     CommentMode = "never"
)

// Inputs are the action's inputs (action.yml), parsed and validated.
type Inputs struct {
	Workflow     string
	Command      string // "run", "retry", or plan/shard/gather (sharded fan-out)
	RetryFromRun int64  // run id whose DLQ artifact is redriven (command retry)
	RetryFilter  string
	RetryForce   bool
	// RetryOnto is a branch or revision merged into the redrive's results
	// branch before it runs (retry-onto); "" merges nothing.
	RetryOnto string
	// RetrySignature restricts the redrive to the records with this
	// error_signature (retry-signature); "" redrives every signature.
	RetrySignature string
	// RetrySample, with RetrySignature, is the canary size (retry-sample):
	// that many records of the cluster run first and the rest only if not
	// all of them fail again the same way; 0 runs the whole cluster.
	RetrySample int
	// MaxCostUSD is the job's spend budget (max-cost-usd); 0 keeps the
	// workflow's budget.max_cost_usd.
	MaxCostUSD            float64
	MaxParallel           int // 0 keeps the workflow's max_parallel
	GitHubToken           string
	Comment               CommentMode
	PRNumber              string // raw; resolved with PullRequestNumber
	ArtifactName          string // prefix of the DLQ artifact name
	ArtifactRetentionDays int    // 0 keeps the repository default
	Push                  bool
	FailOnDLQ             bool
	ClaudeCommand         string
	ClaudeArgs            []string
	// AgentUser is who map steps run as (agent-user): "auto" (action.yml's
	// default: a uid of their own per agent when the container runs as
	// root), "off" (as the engine), or a runner.Agents.User spec.
	AgentUser string
	// ClaudeModel, ClaudePermissionMode, ClaudeAllowedTools,
	// ClaudeDisallowedTools and ClaudeMaxTurns override the workflow's
	// claude options (inputs claude-model, claude-permission-mode,
	// claude-allowed-tools, claude-disallowed-tools, claude-max-turns);
	// a nil list is unset. actionapp validates them.
	ClaudeModel           string
	ClaudePermissionMode  string
	ClaudeAllowedTools    []string
	ClaudeDisallowedTools []string
	ClaudeMaxTurns        int
	// RedriveWorkflow is the workflow file shown in the redrive command;
	// "" means the current workflow's file.
	RedriveWorkflow string
	// SecretValues are extra values to redact (input secret-values, one
	// per line; blank lines ignored).
	SecretValues []string
}

// ReadInputs reads every input through a (INPUT_* variables, already
// defaulted by the runner from action.yml) and validates them; all
// problems are reported together. Empty inputs take the action.yml defaults
// so tests and local runs need not set them.
func ReadInputs(a *githubactions.Action) (Inputs, error) {
	in := Inputs{
		Workflow:      a.GetInput("workflow"),
		Command:       strings.ToLower(a.GetInput("command")),
		RetryFilter:   a.GetInput("retry-filter"),
		RetryOnto:     a.GetInput("retry-onto"),
		GitHubToken:   a.GetInput("github-token"),
		Comment:       CommentMode(strings.ToLower(a.GetInput("comment"))),
		PRNumber:      a.GetInput("pr-number"),
		ArtifactName:  a.GetInput("artifact-name"),
		ClaudeCommand: a.GetInput("claude-command"),
		ClaudeArgs:    strings.Fields(a.GetInput("claude-args")),
		AgentUser:     strings.TrimSpace(a.GetInput("agent-user")),

		ClaudeModel:           strings.TrimSpace(a.GetInput("claude-model")),
		ClaudePermissionMode:  strings.TrimSpace(a.GetInput("claude-permission-mode")),
		ClaudeAllowedTools:    toolList(a.GetInput("claude-allowed-tools")),
		ClaudeDisallowedTools: toolList(a.GetInput("claude-disallowed-tools")),

		RedriveWorkflow: a.GetInput("redrive-workflow"),
		SecretValues:    secretLines(a.GetInput("secret-values")),
	}
	var errs []error
	if in.Command == "" {
		in.Command = "run"
	}
	if in.Comment == "" {
		in.Comment = CommentAlways
	}
	if in.ArtifactName == "" {
		in.ArtifactName = "prodigy-dlq"
	}
	switch in.Command {
	case "run", "retry", "plan", "shard", "gather":
	default:
		errs = append(errs, fmt.Errorf("input command: %q is not run, retry, plan, shard or gather", in.Command))
	}
	switch in.Comment {
	case CommentAlways, CommentOnFailure, CommentNever:
	default:
		errs = append(errs, fmt.Errorf("input comment: %q is not always, on-failure or never", in.Comment))
	}
	if in.Command == "run" && in.Workflow == "" {
		errs = append(errs, errors.New("input workflow is required for command run"))
	}
	if err := ValidateArtifactName(in.ArtifactName); err != nil {
		errs = append(errs, fmt.Errorf("input artifact-name: %w", err))
	}
	in.RetrySignature = a.GetInput("retry-signature")
	var err error
	if in.RetryFromRun, err = parseInt64(a.GetInput("retry-from-run")); err != nil {
		errs = append(errs, fmt.Errorf("input retry-from-run: %w", err))
	} else if in.Command == "retry" && in.RetryFromRun <= 0 {
		errs = append(errs, errors.New("input retry-from-run is required for command retry"))
	}
	n, err := parseInt64(a.GetInput("max-parallel"))
	in.MaxParallel = int(n)
	if err != nil {
		errs = append(errs, fmt.Errorf("input max-parallel: %w", err))
	}
	n, err = parseInt64(a.GetInput("claude-max-turns"))
	in.ClaudeMaxTurns = int(n)
	if err != nil {
		errs = append(errs, fmt.Errorf("input claude-max-turns: %w", err))
	}
	n, err = parseInt64(a.GetInput("retry-sample"))
	in.RetrySample = int(n)
	if err != nil {
		errs = append(errs, fmt.Errorf("input retry-sample: %w", err))
	} else if n > 0 && in.RetrySignature == "" {
		errs = append(errs, errors.New("input retry-sample needs retry-signature"))
	}
	if s := a.GetInput("max-cost-usd"); s != "" {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil || v <= 0 || math.IsInf(v, 0) || math.IsNaN(v) {
			errs = append(errs, fmt.Errorf("input max-cost-usd: %q is not a positive amount of US dollars", s))
		}
		in.MaxCostUSD = v
	}
	n, err = parseInt64(a.GetInput("artifact-retention-days"))
	in.ArtifactRetentionDays = int(n)
	if err != nil || n > 90 {
		errs = append(errs, fmt.Errorf("input artifact-retention-days: want 1-90 (or empty), got %q", a.GetInput("artifact-retention-days")))
	}
	for name, dst := range map[string]*bool{"retry-force": &in.RetryForce, "push": &in.Push, "fail-on-dlq": &in.FailOnDLQ} {
		if *dst, err = parseBool(a.GetInput(name)); err != nil {
			errs = append(errs, fmt.Errorf("input %s: %w", name, err))
		}
	}
	return in, errors.Join(errs...)
}

// parseInt64 parses a non-negative integer; "" is 0.
func parseInt64(s string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%q is not a non-negative integer", s)
	}
	return n, nil
}

// parseBool accepts the YAML 1.2 core booleans the runner passes ("true",
// "True", "TRUE", "false", …); "" is false.
func parseBool(s string) (bool, error) {
	switch strings.ToLower(s) {
	case "", "false":
		return false, nil
	case "true":
		return true, nil
	}
	return false, fmt.Errorf("%q is not true or false", s)
}

// secretLines splits the secret-values input: one value per line, surrounding
// blanks trimmed, empty lines dropped.
func secretLines(s string) []string {
	var out []string
	for _, line := range strings.Split(s, "\n") {
		if line = strings.TrimSpace(line); line != "" {
			out = append(out, line)
		}
	}
	return out
}

// toolList reads a tools input: one rule per line or comma-separated;
// nil when the input is empty (unset).
func toolList(v string) []string {
	if strings.TrimSpace(v) == "" {
		return nil
	}
	var out []string
	for _, line := range strings.Split(v, "\n") {
		for _, t := range strings.Split(line, ",") {
			if t = strings.TrimSpace(t); t != "" {
				out = append(out, t)
			}
		}
	}
	return out
}
