package cmdutil

import (
	"fmt"
	"os"
	"runtime/debug"
	"strings"
)

// Name is the program's name everywhere it calls itself (help, usage,
// hints, completion scripts); README's install line builds it so.
const Name = "prodigy-action"

// ClaudeCodeVersionFile is where the container image records the version
// of the Claude Code it ships (.ci/image-context writes the npm package
// spec, e.g. "@anthropic-ai/claude-code-linux-x64@2.0.1").
const ClaudeCodeVersionFile = "/usr/local/lib/claude-code/VERSION"

// VersionString is what --version prints: the module version and commit
// of this build (from the Go build information: "(devel)" and "unknown"
// for a plain `go build` in a checkout without VCS stamping) and, when
// known, the version of Claude Code next to it: $PRODIGY_CLAUDE_CODE_VERSION,
// else the first line of f.ClaudeVersionFile (ClaudeCodeVersionFile when
// empty), else "unknown".
func (f *Factory) VersionString() string {
	version, commit, dirty := "(devel)", "unknown", ""
	if f.BuildInfo != nil {
		if bi, ok := f.BuildInfo(); ok && bi != nil {
			if bi.Main.Version != "" {
				version = bi.Main.Version
			}
			for _, s := range bi.Settings {
				switch s.Key {
				case "vcs.revision":
					commit = s.Value
				case "vcs.modified":
					if s.Value == "true" {
						dirty = " (modified)"
					}
				}
			}
		}
	}
	return fmt.Sprintf("prodigy-action %s\ncommit: %s%s\nclaude code: %s", version, commit, dirty, f.claudeCodeVersion())
}

func (f *Factory) claudeCodeVersion() string {
	if v := strings.TrimSpace(f.Getenv("PRODIGY_CLAUDE_CODE_VERSION")); v != "" {
		return v
	}
	file := f.ClaudeVersionFile
	if file == "" {
		file = ClaudeCodeVersionFile
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "unknown"
	}
	line, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
	// "@anthropic-ai/claude-code-linux-x64@2.0.1" → "2.0.1 (@anthropic-ai/…)"
	if i := strings.LastIndex(line, "@"); i > 0 {
		return line[i+1:] + " (" + line + ")"
	}
	if line == "" {
		return "unknown"
	}
	return line
}

// readBuildInfo is debug.ReadBuildInfo (the Factory's default BuildInfo).
var readBuildInfo = debug.ReadBuildInfo
