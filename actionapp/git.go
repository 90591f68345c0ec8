package actionapp

import (
	"context"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"

	"github.com/prodigy-action/prodigy-action/gitops"
	"github.com/prodigy-action/prodigy-action/runner"
)

// addSafeDirectory makes every git process of this container trust dir
// through GIT_CONFIG_COUNT/KEY/VALUE (appended to any already set), so the
// runner-owned workspace is usable by root without touching a config file.
func addSafeDirectory(getenv func(string) string, setenv func(k, v string) error, dir string) error {
	return addGitConfigEnv(getenv, setenv, "safe.directory", dir)
}

func addGitConfigEnv(getenv func(string) string, setenv func(k, v string) error, key, value string) error {
	n := 0
	if s := getenv("GIT_CONFIG_COUNT"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil || n < 0 {
			return fmt.Errorf("GIT_CONFIG_COUNT=%q is not a count", s)
		}
	}
	for k, v := range map[string]string{
		"GIT_CONFIG_KEY_" + strconv.Itoa(n):   key,
		"GIT_CONFIG_VALUE_" + strconv.Itoa(n): value,
		"GIT_CONFIG_COUNT":                    strconv.Itoa(n + 1),
	} {
		if err := setenv(k, v); err != nil {
			return fmt.Errorf("set %s: %w", k, err)
		}
	}
	return nil
}

// authEnv returns environment that makes git send the token to server the
// way actions/checkout does (an http.extraheader), without writing it to
// any file or putting it on a command line. The first entry clears headers
// configured by checkout, so only one Authorization header is sent.
func authEnv(base []string, server, token string) []string {
	key := "http." + strings.TrimSuffix(server, "/") + "/.extraheader"
	basic := base64.StdEncoding.EncodeToString([]byte("x-access-token:" + token))
	n := 0
	for _, kv := range base {
		if v, ok := strings.CutPrefix(kv, "GIT_CONFIG_COUNT="); ok {
			n, _ = strconv.Atoi(v)
		}
	}
	env := append([]string(nil), base...)
	env = append(env,
		fmt.Sprintf("GIT_CONFIG_KEY_%d=%s", n, key), fmt.Sprintf("GIT_CONFIG_VALUE_%d=", n),
		fmt.Sprintf("GIT_CONFIG_KEY_%d=%s", n+1, key), fmt.Sprintf("GIT_CONFIG_VALUE_%d=AUTHORIZATION: basic %s", n+1, basic),
		fmt.Sprintf("GIT_CONFIG_COUNT=%d", n+2), "GIT_TERMINAL_PROMPT=0")
	return env
}

// push pushes the results branch to origin when the push input is set.
func (r *actionRun) push(ctx context.Context, res *runner.Result) error {
	if !r.in.Push || res.ResultsBranch == "" {
		return nil
	}
	if r.in.GitHubToken == "" {
		return fmt.Errorf("push needs github-token")
	}
	server := r.ctx.ServerURL
	if server == "" {
		server = "https://github.com"
	}
	ref := "refs/heads/" + res.ResultsBranch
	env := authEnv(r.env.Environ(), server, r.in.GitHubToken)
	err := r.env.Git(ctx, r.ws, env, "push", "--quiet", "origin", ref+":"+ref)
	if err != nil {
		return fmt.Errorf("%s", r.redact.String(err.Error()))
	}
	r.env.gha.Noticef("pushed %s", res.ResultsBranch)
	return nil
}

// execGit runs git in dir with env (nil: the process environment)
// through gitops, the one package that starts git.
func execGit(ctx context.Context, dir string, env []string, args ...string) error {
	c, err := gitops.New(dir, gitops.Options{Env: env})
	if err != nil {
		return err
	}
	_, err = c.Run(ctx, dir, args...)
	return err
}
