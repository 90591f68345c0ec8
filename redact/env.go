package redact

import (
	"regexp"
	"strings"
)

// MinEnvValue is the shortest value of a secret-looking environment
// variable that is redacted: shorter values ("true", "1") would blank out
// ordinary text.
const MinEnvValue = 8

// MinValue is the shortest declared or extra value that is redacted.
const MinValue = 4

var secretName = regexp.MustCompile(`(?i)TOKEN|SECRET|PASSW(?:OR)?D|API[_-]?KEY|PRIVATE[_-]?KEY|CREDENTIAL|ACCESS[_-]?KEY`)

// SecretName reports whether an environment variable name looks like it
// holds a secret: it contains TOKEN, SECRET, PASSWORD, PASSWD, API_KEY,
// APIKEY, PRIVATE_KEY, CREDENTIAL or ACCESS_KEY, in any case (a hyphen
// may stand for the underscore, as in Action inputs such as
// INPUT_GITHUB-TOKEN).
func SecretName(name string) bool { return secretName.MatchString(name) }

// envValues returns the values to redact from environ (KEY=VALUE
// entries): those of secret-looking names (at least MinEnvValue bytes)
// and those of the declared names (at least MinValue bytes).
func envValues(environ, declared []string) []string {
	decl := make(map[string]bool, len(declared))
	for _, n := range declared {
		decl[n] = true
	}
	var out []string
	for _, kv := range environ {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			continue
		}
		switch {
		case decl[k] && len(v) >= MinValue:
			out = append(out, v)
		case SecretName(k) && len(v) >= MinEnvValue:
			out = append(out, v)
		}
	}
	return out
}
