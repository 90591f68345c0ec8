package redact_test

import (
	"io"
	"strings"
	"testing"

	"github.com/prodigy-action/prodigy-action/redact"
)

// benchLog is 8 MB of build-log-like text with a few secrets.
func benchLog() []byte {
	var sb strings.Builder
	line := "2026-11-22T22:10:00Z [agent-3] compiling task-runner/disk-usage.go: ok (eyJ not a jwt, sk-short)\n"
	for sb.Len() < 8<<20 {
		sb.WriteString(line)
		if sb.Len()%(1<<20) < len(line) {
			sb.WriteString("token " + ghp + " and value-of-the-secret-42\n")
		}
	}
	return []byte(sb.String())
}

func benchRedactor() *redact.Redactor {
	env := []string{"API_SECRET=value-of-the-secret-42"}
	for i := range 50 {
		env = append(env, "SVC_TOKEN_"+strings.Repeat("X", i)+"=some-longer-token-value-"+strings.Repeat("y", i))
	}
	return redact.New(redact.Config{Environ: env})
}

func BenchmarkBytes(b *testing.B) {
	r, log := benchRedactor(), benchLog()
	b.SetBytes(int64(len(log)))
	for b.Loop() {
		r.Bytes(log)
	}
}

func BenchmarkWriter(b *testing.B) {
	r, log := benchRedactor(), benchLog()
	b.SetBytes(int64(len(log)))
	for b.Loop() {
		w := r.Writer(io.Discard)
		for i := 0; i < len(log); i += 32 << 10 {
			w.Write(log[i:min(len(log), i+32<<10)])
		}
		w.Close()
	}
}

func BenchmarkJSON(b *testing.B) {
	r, log := benchRedactor(), benchLog()
	js := []byte(`{"log":` + strings.ReplaceAll(string(log), "\n", `","x":"`) + `"}`)
	b.SetBytes(int64(len(js)))
	for b.Loop() {
		r.JSON(js)
	}
}
