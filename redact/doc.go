// Package redact removes secrets from text before it reaches any sink: the
// files under $PRODIGY_HOME, stderr, the job summary, the PR comment and the
// DLQ artifact.
//
// A [Redactor] knows three kinds of secret:
//
//   - literal values: the values of environment variables whose names look
//     secret (see [SecretName]; values of at least 8 bytes), the values of
//     variables the user declares secret, and extra values (tokens);
//   - well-known token shapes: GitHub tokens (ghp_, gho_, ghu_, ghs_, ghr_,
//     github_pat_), Anthropic (sk-ant-) and OpenAI-style (sk-) keys, AWS
//     access key ids (AKIA, ASIA), Slack tokens (xox?-), JSON Web Tokens and
//     PEM private-key blocks, including multi-line and JSON-escaped blocks;
//   - the escaped forms of every literal as they appear in JSON, in Go %q
//     output and in URL queries.
//
// Every byte covered by any occurrence of any secret is replaced; a run of
// covered bytes becomes one [Mask]. One scan finds both the literals and the
// anchors of the shapes (a 3-byte prefix filter), so text without secrets
// costs one pass and no allocation; shape regexps run only where an anchor
// occurs.
//
// [Redactor.String] and [Redactor.Bytes] redact text; [Redactor.JSON]
// redacts inside the string literals of JSON (decoded, then re-encoded, so
// the result stays valid JSON); [Redactor.Writer] and
// [Redactor.JSONLinesWriter] redact a stream, holding back a tail so that a
// secret split across Write calls is still found. A nil *Redactor redacts
// token shapes only. A Redactor is immutable and safe for concurrent use.
package redact
