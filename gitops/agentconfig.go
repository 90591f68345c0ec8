package gitops

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// agentKeys are the configuration entries of the repository's own files
// (local and worktree scope) an agent's repository gets: its identity,
// how files are checked out and compared, and the sparse checkout. Global
// and system configuration the agent's git reads itself.
func agentKey(key string) bool {
	section, variable, _ := strings.Cut(strings.ToLower(key), ".")
	switch section {
	case "user", "author", "committer":
		return variable == "name" || variable == "email"
	case "core":
		switch variable {
		case "filemode", "ignorecase", "precomposeunicode", "symlinks", "autocrlf", "eol", "safecrlf",
			"untrackedcache", "sparsecheckout", "sparsecheckoutcone", "quotepath", "checkstat", "trustctime":
			return true
		}
	case "index":
		return variable == "version" || variable == "sparse"
	case "init":
		return variable == "defaultbranch"
	}
	return false
}

// cachedAgentConfig is agentConfig, read once per Client and worktree
// configuration: every worktree a job hands out has the same settings
// (those of the repository, and the sparse checkout the engine gave all of
// them), so one `git config` serves every hand-out. A worktree with a
// config.worktree of its own is read for itself.
func (c *Client) cachedAgentConfig(ctx context.Context, dir string) ([]byte, error) {
	if gd, ok := worktreeGitDir(dir); ok {
		if _, err := os.Stat(filepath.Join(gd, "config.worktree")); err == nil {
			return c.agentConfig(ctx, dir)
		}
	}
	c.agentCfgMu.Lock()
	defer c.agentCfgMu.Unlock()
	if c.agentCfg == nil {
		b, err := c.agentConfig(ctx, dir)
		if err != nil {
			return nil, err
		}
		c.agentCfg = b
	}
	return c.agentCfg, nil
}

// agentConfig returns the agent repository's config file: the repository's
// own agentKey entries and its hooks directory.
func (c *Client) agentConfig(ctx context.Context, dir string) ([]byte, error) {
	out, err := c.run(ctx, dir, nil, nil, "config", "--list", "--show-scope", "-z")
	if err != nil {
		return nil, fmt.Errorf("read the repository's configuration: %w", err)
	}
	var b bytes.Buffer
	b.WriteString("[core]\n\trepositoryformatversion = 0\n\tbare = false\n\tlogallrefupdates = true\n")
	var hooks string
	globalHooks := false
	fields := strings.Split(out, "\x00")
	for i := 0; i+1 < len(fields); i += 2 {
		scope := fields[i]
		key, value, _ := strings.Cut(fields[i+1], "\n")
		if strings.EqualFold(key, "core.hookspath") {
			switch scope {
			case "local", "worktree":
				hooks = value
			case "global", "system":
				globalHooks = true
			}
			continue
		}
		// Identity from every scope: an agent of another user, with a HOME
		// of its own, reads neither the engine's global nor its system
		// configuration.
		identity := strings.HasPrefix(strings.ToLower(key), "user.") || strings.HasPrefix(strings.ToLower(key), "author.") || strings.HasPrefix(strings.ToLower(key), "committer.")
		if agentKey(key) && (scope == "local" || scope == "worktree" || identity && scope != "command") {
			section, variable, _ := strings.Cut(key, ".")
			fmt.Fprintf(&b, "[%s]\n\t%s = %s\n", section, variable, quoteConfigValue(value))
		}
	}
	switch {
	case hooks != "":
		hooks = expandHome(hooks)
		if !filepath.IsAbs(hooks) {
			hooks = filepath.Join(c.top, hooks)
		}
	case !globalHooks:
		hooks = filepath.Join(c.commonDir, "hooks")
	}
	if hooks != "" {
		fmt.Fprintf(&b, "[core]\n\thooksPath = %s\n", quoteConfigValue(hooks))
	}
	return b.Bytes(), nil
}

// expandHome expands a leading "~/" as git does for core.hooksPath.
func expandHome(p string) string {
	if rest, ok := strings.CutPrefix(p, "~/"); ok {
		if home, err := os.UserHomeDir(); err == nil {
			return filepath.Join(home, rest)
		}
	}
	return p
}

// quoteConfigValue quotes a value for a git config file.
func quoteConfigValue(v string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`, "\t", `\t`, "\b", `\b`)
	return `"` + r.Replace(v) + `"`
}
