// Package ghaction talks to GitHub from inside a workflow run: it uploads
// the dead letter queue as a workflow artifact (v4 artifact protocol),
// downloads the DLQ artifact of an earlier run over the REST API, keeps one
// sticky pull request comment up to date, finds the pull request of the
// triggering event, and keeps untrusted text from acting as a workflow
// command (EchoUntrusted, NeutralizeWriter). Callers redact secrets (package
// redact) before text reaches it; BuildDLQZip takes the redaction function.
//
// Every side effect is injected: HTTP clients, base URLs, tokens, the
// backoff sleeper and the environment. The package imports go-github and
// go-githubactions only; it knows nothing of the engine's types.
package ghaction
