package main

import (
	"context"

	"github.com/prodigy-action/prodigy-action/actionapp"
)

func init() {
	actionMode = func(ctx context.Context, a *app) int {
		return actionapp.Main(ctx, actionapp.Deps{Getenv: a.getenv, Stdout: a.stdout, Stderr: a.stderr, Clock: a.clock})
	}
}
