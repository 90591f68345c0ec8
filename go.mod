module github.com/prodigy-action/prodigy-action

go 1.25.0

require (
	github.com/expr-lang/expr v1.17.8
	github.com/goccy/go-yaml v1.19.2
	github.com/google/go-github/v60 v60.0.0
	github.com/sethvargo/go-githubactions v1.4.0
	github.com/spf13/cobra v1.10.2
	github.com/spf13/pflag v1.0.9
	github.com/theory/jsonpath v0.10.2
	golang.org/x/sync v0.19.0
	mvdan.cc/sh/v3 v3.13.1
)

require (
	github.com/google/go-querystring v1.1.0 // indirect
	github.com/inconshreveable/mousetrap v1.1.0 // indirect
)
