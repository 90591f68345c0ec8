package gitops

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// Identity is a git author/committer name and email.
type Identity struct {
	Name  string
	Email string
}

// DefaultIdentity is the bot identity used for commits when the repository
// has no identity configured (fresh CI runners).
var DefaultIdentity = Identity{
	Name:  "prodigy-action[bot]",
	Email: "prodigy-action@users.noreply.github.com",
}

// IdentityEnv returns the environment variables (GIT_AUTHOR_NAME,
// GIT_AUTHOR_EMAIL, GIT_COMMITTER_NAME, GIT_COMMITTER_EMAIL) that give git
// commits an identity where the repository has none, using the client's
// identity ([DefaultIdentity] unless [Options.Identity] is set). A variable
// is returned only if git would otherwise have no value for it: neither the
// effective config (user.name/user.email, or author.*/committer.*) nor the
// client's environment (the variable itself, or EMAIL for emails) provides
// it. If everything is configured the result is nil. Merges made by this
// package apply it automatically; callers pass it to processes that commit
// (agents). The answer is computed once per Client and cached.
func (c *Client) IdentityEnv(ctx context.Context) ([]string, error) {
	c.idMu.Lock()
	defer c.idMu.Unlock()
	if c.idOK {
		return slices.Clone(c.idEnv), nil
	}
	out, err := c.run(ctx, c.top, nil, nil, "config", "--get-regexp", `^(user|author|committer)\.(name|email)$`)
	if err != nil && exitCode(err) != 1 { // exit 1: none of the keys is set
		return nil, fmt.Errorf("read identity config: %w", err)
	}
	set := map[string]bool{}
	for _, line := range strings.Split(out, "\n") {
		key, val, _ := strings.Cut(line, " ")
		if strings.TrimSpace(val) != "" {
			set[strings.ToLower(key)] = true
		}
	}
	for _, kv := range c.env {
		k, v, _ := strings.Cut(kv, "=")
		if v != "" {
			set["env:"+k] = true
		}
	}
	var env []string
	add := func(envName, who, field, value string) {
		if set["env:"+envName] || set["user."+field] || set[who+"."+field] ||
			field == "email" && set["env:EMAIL"] {
			return
		}
		env = append(env, envName+"="+value)
	}
	add("GIT_AUTHOR_NAME", "author", "name", c.identity.Name)
	add("GIT_AUTHOR_EMAIL", "author", "email", c.identity.Email)
	add("GIT_COMMITTER_NAME", "committer", "name", c.identity.Name)
	add("GIT_COMMITTER_EMAIL", "committer", "email", c.identity.Email)
	c.idEnv, c.idOK = env, true
	return slices.Clone(env), nil
}
