package cmdutil

import "github.com/spf13/pflag"

// AgentUserFlag registers --agent-user (the default comes from
// $PRODIGY_AGENT_USER, see Factory.Agents).
func AgentUserFlag(fs *pflag.FlagSet, p *string) {
	fs.StringVar(p, "agent-user", "", `run every map step as this user when the engine runs as root: NAME, UID[:GID], FIRST-LAST[:GID] (a uid of its own for each agent running at once) or auto (70000 up, when root); agents then cannot write the repository's git directory or the state directory (default $PRODIGY_AGENT_USER)`)
}
