package gitops

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/prodigy-action/prodigy-action/internal/brief"
)

// This file holds what keeps agents — processes that share the
// repository's git directory and the engine's user — from changing what
// the engine's git does:
//
//   - neutralConfig, appended last to every git child of a Client, turns
//     off what a repository config could make git run or ask for without
//     a name the engine can know in advance: credential helpers, askpass
//     programs, signing (gpg.program), signature checks and submodule
//     recursion. It cannot name filter or merge drivers, url.*.insteadOf
//     or include files: [Client.AuditConfig] finds those.
//   - [Client.PushCommit] pushes from a repository only the engine writes,
//     with no system, global or repository configuration at all.

// neutralConfig is appended after [Options.Config] (and after any command's
// own configuration) to every git child, so neither can turn it back on.
var neutralConfig = []ConfigEntry{
	{"credential.helper", ""}, // the empty value resets the list of helpers
	{"core.askPass", ""},
	{"commit.gpgSign", "false"},
	{"tag.gpgSign", "false"},
	{"merge.verifySignatures", "false"},
	{"submodule.recurse", "false"},
}

// riskyConfig reports whether a configuration key (as git lists it:
// section and variable lower case, subsection as written) can make git
// run a program, send a credential, talk to another host or read more
// configuration: credential.*, url.*, http.*, https.*, remote.*,
// protocol.*, filter.*, merge.*.driver, diff.*.command/textconv,
// include.* and includeIf.*, gpg.*, submodule.*, uploadpack.*, and the
// core and commit keys that name programs, hooks or another work tree.
func riskyConfig(key string) bool {
	k := strings.ToLower(key)
	section, rest, _ := strings.Cut(k, ".")
	variable := rest
	if i := strings.LastIndexByte(rest, '.'); i >= 0 {
		variable = rest[i+1:]
	}
	switch section {
	case "credential", "url", "http", "https", "remote", "protocol", "filter",
		"include", "includeif", "gpg", "submodule", "uploadpack", "receive":
		return true
	case "merge":
		return variable == "driver" || variable == "recursive" || variable == "verifysignatures"
	case "diff":
		return variable == "command" || variable == "textconv" || variable == "external"
	case "core":
		switch variable {
		case "sshcommand", "askpass", "gitproxy", "hookspath", "fsmonitor", "worktree",
			"bare", "pager", "editor", "alternaterefscommand", "attributesfile", "excludesfile":
			return true
		}
	case "commit", "tag":
		return variable == "gpgsign"
	case "sequence":
		return variable == "editor"
	}
	return false
}

// ConfigFinding is one configuration entry [Client.AuditConfig] reports:
// where git read it (system, global, local, worktree) and what it says.
type ConfigFinding struct {
	Scope, Key, Value string
}

func (f ConfigFinding) String() string {
	return fmt.Sprintf("%s %s=%q", f.Scope, f.Key, f.Value)
}

// AuditConfig lists the risky entries (see riskyConfig: credential
// helpers, url rewrites, proxies, ssh and askpass commands, filter and
// merge drivers, includes, …) of every configuration file git reads for the
// repository, include files followed, as git itself resolves them
// (`git config --list --show-scope --includes -z`). The engine's own
// entries (scope "command") are left out. Compare two audits with
// [AddedConfig] to find what changed in between: the entries are the
// same while nobody writes a configuration file.
//
// dirs are further worktrees of the repository whose own configuration
// (config.worktree, with extensions.worktreeConfig) is read too, as git
// reads it for commands run there; their entries come after the top
// level's, scope "worktree".
func (c *Client) AuditConfig(ctx context.Context, dirs ...string) ([]ConfigFinding, error) {
	found, err := c.auditConfig(ctx, c.top, false)
	if err != nil {
		return nil, err
	}
	for _, d := range dirs {
		more, err := c.auditConfig(ctx, d, true)
		if err != nil {
			return nil, err
		}
		found = append(found, more...)
	}
	return found, nil
}

func (c *Client) auditConfig(ctx context.Context, dir string, worktreeOnly bool) ([]ConfigFinding, error) {
	out, err := c.run(ctx, dir, nil, nil, "config", "--list", "--show-scope", "--includes", "-z")
	if err != nil {
		return nil, fmt.Errorf("read the repository's configuration: %w", err)
	}
	var found []ConfigFinding
	fields := strings.Split(out, "\x00")
	for i := 0; i+1 < len(fields); i += 2 {
		scope := fields[i]
		key, value, _ := strings.Cut(fields[i+1], "\n")
		if scope == "command" || (worktreeOnly && scope != "worktree") || !riskyConfig(key) {
			continue
		}
		found = append(found, ConfigFinding{Scope: scope, Key: key, Value: value})
	}
	return found, nil
}

// AddedConfig returns the entries of now that before does not have (as
// many times as they are extra).
func AddedConfig(before, now []ConfigFinding) []ConfigFinding {
	seen := map[ConfigFinding]int{}
	for _, f := range before {
		seen[f]++
	}
	var added []ConfigFinding
	for _, f := range now {
		if seen[f] > 0 {
			seen[f]--
			continue
		}
		added = append(added, f)
	}
	return added
}

// PushURL returns where `git push remote` would send to, as the
// repository's configuration says now (pushurl, url, insteadOf rewrites
// applied: `git remote get-url --push`). Read it before agents run and give
// it to [Client.PushCommit].
func (c *Client) PushURL(ctx context.Context, remote string) (string, error) {
	if remote == "" || strings.HasPrefix(remote, "-") {
		return "", fmt.Errorf("push url: invalid remote %q", remote)
	}
	out, err := c.run(ctx, c.top, nil, nil, "remote", "get-url", "--push", "--", remote)
	if err != nil {
		return "", fmt.Errorf("push url of %s: %w", remote, err)
	}
	u := strings.TrimSpace(out)
	if u == "" || strings.HasPrefix(u, "-") || strings.ContainsAny(u, "\n\x00") {
		return "", fmt.Errorf("push url of %s: unusable url %q", remote, u)
	}
	return u, nil
}

// PushCommit pushes commit to dstRef (a full ref name) at url without
// reading any configuration an agent could have written: the push runs in
// a new, private (0700) bare repository under tmpDir ("" means
// os.TempDir()) that borrows this repository's objects through
// objects/info/alternates (objects are data: nothing in them runs), with
// GIT_CONFIG_NOSYSTEM=1 and GIT_CONFIG_GLOBAL=/dev/null, hooks off, and
// config (for example [HTTPAuthConfig]) in the environment of that one
// git process. So no credential helper, url rewrite, proxy, ssh or askpass
// command, include or hook of the repository, the user or the system takes
// part in it, and the only remote is url. The private repository is
// deleted afterwards.
func (c *Client) PushCommit(ctx context.Context, tmpDir, url, commit, dstRef string, config []ConfigEntry) error {
	switch {
	case url == "" || strings.HasPrefix(url, "-"):
		return fmt.Errorf("push: invalid url %q", url)
	case !isHexOID(commit):
		return fmt.Errorf("push: %q is not a commit id", commit)
	case !strings.HasPrefix(dstRef, "refs/") || !validRefName(dstRef):
		return fmt.Errorf("push: invalid destination ref %q", dstRef)
	}
	dir, err := os.MkdirTemp(tmpDir, "prodigy-push-")
	if err != nil {
		return fmt.Errorf("push: %w", err)
	}
	defer os.RemoveAll(dir)
	r := c.runner.pinned()
	if _, err := r.run(ctx, dir, nil, nil, "init", "--quiet", "--bare", "--template="); err != nil {
		return fmt.Errorf("push: make a private repository: %w", err)
	}
	info := filepath.Join(dir, "objects", "info")
	if err := os.MkdirAll(info, 0o700); err != nil {
		return fmt.Errorf("push: %w", err)
	}
	objects := filepath.Join(c.commonDir, "objects")
	if err := os.WriteFile(filepath.Join(info, "alternates"), []byte(objects+"\n"), 0o600); err != nil {
		return fmt.Errorf("push: %w", err)
	}
	r = r.withCommandConfig(config)
	if _, err := r.run(ctx, dir, nil, nil, "push", "--quiet", "--no-verify", "--end-of-options", url, commit+":"+dstRef); err != nil {
		return fmt.Errorf("push %s to %s: %w", brief.SHA(commit), url, err)
	}
	return nil
}

// pinned returns a copy of r whose processes read no system or global
// configuration file (GIT_CONFIG_NOSYSTEM=1, GIT_CONFIG_GLOBAL=/dev/null,
// GIT_CONFIG_SYSTEM dropped).
func (r runner) pinned() runner {
	strip := func(env []string) []string {
		out := slices.DeleteFunc(slices.Clone(env), func(kv string) bool {
			k, _, _ := strings.Cut(kv, "=")
			return k == "GIT_CONFIG_NOSYSTEM" || k == "GIT_CONFIG_GLOBAL" || k == "GIT_CONFIG_SYSTEM" || k == "XDG_CONFIG_HOME"
		})
		return append(out, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL="+os.DevNull)
	}
	r.base = strip(r.base)
	r.env = strip(r.env)
	return r
}

// ErrConfigChanged is wrapped by errors that report risky configuration
// added while agents ran (see [AddedConfig]).
var ErrConfigChanged = errors.New("git configuration changed")

// IsAncestor reports whether anc is an ancestor of (or equal to) desc:
// in-process when the history walk decides within a bounded number of
// commits, else `git merge-base --is-ancestor`.
func (c *Client) IsAncestor(ctx context.Context, anc, desc string) (bool, error) {
	if !isHexOID(anc) || !isHexOID(desc) {
		return false, fmt.Errorf("is-ancestor: %q and %q must be commit ids", anc, desc)
	}
	if c.objects != nil {
		if yes, ok := c.objects.isAncestor(anc, desc, nil); ok {
			return yes, nil
		}
	}
	_, err := c.run(ctx, c.top, nil, nil, "merge-base", "--is-ancestor", anc, desc)
	switch {
	case err == nil:
		return true, nil
	case exitCode(err) == 1:
		return false, nil
	default:
		return false, fmt.Errorf("is %s an ancestor of %s: %w", brief.SHA(anc), brief.SHA(desc), err)
	}
}
