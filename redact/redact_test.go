package redact_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/prodigy-action/prodigy-action/redact"
)

// Test secrets of each shape (made up, never real).
const (
	ghp    = "ghp_" + "abcdefghijklmnopqrstuvwxyzABCDEFGHIJ"
	ghPAT  = "github_pat_" + "11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMN"
	skAnt  = "sk-ant-" + "api03-abcdefghijklmnopqrstuvwxyz0123456789"
	skOAI  = "sk-proj-" + "abcdefghijklmnopqrstuvwx"
	akia   = "AKIA" + "IOSFODNN7EXAMPLE"
	slack  = "xoxb-" + "123456789012-abcdefghijkl"
	jwt    = "eyJhbGciOiJIUzI1NiJ9" + ".eyJzdWIiOiIxMjM0NTY3ODkwIn0" + ".dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
	pemKey = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo\n4lgOEePzNm0tRgeLezV6ffAt0gunVTLw7onL\n-----END RSA PRIVATE KEY-----"
)

func TestSecretName(t *testing.T) {
	yes := []string{"GITHUB_TOKEN", "api_secret", "DB_PASSWORD", "MYSQL_PASSWD", "OPENAI_API_KEY", "X_APIKEY",
		"SSH_PRIVATE_KEY", "GOOGLE_APPLICATION_CREDENTIALS", "AWS_ACCESS_KEY_ID", "INPUT_GITHUB-TOKEN", "input_api-key", "Token"}
	no := []string{"PATH", "HOME", "GITHUB_REPOSITORY", "USER", "KEYBOARD", "API", "PASS", "ACCESS"}
	for _, n := range yes {
		if !redact.SecretName(n) {
			t.Errorf("SecretName(%q) = false, want true", n)
		}
	}
	for _, n := range no {
		if redact.SecretName(n) {
			t.Errorf("SecretName(%q) = true, want false", n)
		}
	}
}

func TestString(t *testing.T) {
	r := redact.New(redact.Config{
		Environ: []string{
			"API_SECRET=s3cr3t-value-42", "GITHUB_TOKEN=plain-token-value", "PATH=/usr/bin:/bin",
			"SHORT_TOKEN=abc1234", // < 8 bytes: kept
			"DEPLOY_HOOK=https://hooks.example/xyz", "QUOTED_SECRET=say \"hi\"\nbye now",
		},
		Names:  []string{"DEPLOY_HOOK"},
		Values: []string{"extra-value-1", "ab"},
	})
	tests := []struct{ name, in, want string }{
		{"env by name", "value is s3cr3t-value-42.", "value is ***."},
		{"github token env", "Authorization: token plain-token-value", "Authorization: token ***"},
		{"short env value kept", "abc1234 stays", "abc1234 stays"},
		{"non-secret env kept", "/usr/bin:/bin", "/usr/bin:/bin"},
		{"declared name", "POST https://hooks.example/xyz failed", "POST *** failed"},
		{"extra value", "x extra-value-1 y", "x *** y"},
		{"too short extra ignored", "ab ab", "ab ab"},
		{"ghp", "token " + ghp + " end", "token *** end"},
		{"ghs in url", "https://x-access-token:ghs_" + strings.Repeat("a", 36) + "@github.com/o/r", "https://x-access-token:***@github.com/o/r"},
		{"github_pat", ghPAT, "***"},
		{"anthropic", "ANTHROPIC=" + skAnt, "ANTHROPIC=***"},
		{"openai", "key:" + skOAI + ";", "key:***;"},
		{"aws", "id " + akia + " x", "id *** x"},
		{"slack", slack, "***"},
		{"jwt", "Bearer " + jwt, "Bearer ***"},
		{"jwt cut after payload start", "eyJhbGciOiJIUzI1NiJ9.eyJzd", "***"},
		{"pem block", "key:\n" + pemKey + "\ndone", "key:\n***\ndone"},
		{"pem unterminated", "-----BEGIN PRIVATE KEY-----\nMIIEow\nIBAAKC", "***"},
		{"pem escaped newlines", `"-----BEGIN EC PRIVATE KEY-----\nMHcCAQEE\n-----END EC PRIVATE KEY-----"`, `"***"`},
		{"no boundary: task-", "task-abcdefghijklmnopqrstuvwxyz", "task-abcdefghijklmnopqrstuvwxyz"},
		{"short sk- kept", "sk-short", "sk-short"},
		{"adjacent secrets merge", "s3cr3t-value-42extra-value-1", "***"},
		{"token glued to a word", "id=x" + ghp, "id=x***"},
		{"sk- glued to a word kept", "xsk-abcdefghijklmnopqrstuvwxyz", "xsk-abcdefghijklmnopqrstuvwxyz"},
		{"overlapping secrets", "extra-value-1s3cr3t-value-42", "***"},
		{"json escaped value", `{"msg":"say \"hi\"\nbye now"}`, `{"msg":"***"}`},
		{"go quoted value", fmt.Sprintf("%q", "say \"hi\"\nbye now"), `"***"`},
		{"multi-line value line by line", "echo 'say \"hi\"'", "echo '***'"},
		{"short line of a multi-line value kept", "bye now", "bye now"},
		{"url escaped", "q=say+%22hi%22%0Abye+now", "q=***"},
		{"nothing", "plain text", "plain text"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := r.String(tt.in); got != tt.want {
				t.Errorf("String(%q)\n got %q\nwant %q", tt.in, got, tt.want)
			}
			if got := string(r.Bytes([]byte(tt.in))); got != tt.want {
				t.Errorf("Bytes(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestNilRedactsShapesOnly(t *testing.T) {
	var r *redact.Redactor
	if got := r.String("a " + ghp + " s3cr3t-value-42"); got != "a *** s3cr3t-value-42" {
		t.Errorf("nil String = %q", got)
	}
	if r.Values() != nil {
		t.Error("nil Values not nil")
	}
	w := r.With("s3cr3t-value-42")
	if got := w.String("a " + ghp + " s3cr3t-value-42"); got != "a *** ***" {
		t.Errorf("nil.With String = %q", got)
	}
}

func TestWithKeepsOriginal(t *testing.T) {
	r := redact.New(redact.Config{Values: []string{"first-secret"}})
	r2 := r.With("second-secret", "first-secret")
	if got := r.String("first-secret second-secret"); got != "*** second-secret" {
		t.Errorf("original changed: %q", got)
	}
	if got := r2.String("first-secret second-secret"); got != "*** ***" {
		t.Errorf("With: %q", got)
	}
	if got := r2.Values(); len(got) != 2 || got[0] != "second-secret" {
		t.Errorf("Values = %q, want both, longest first", got)
	}
}

func TestStarLiteralStable(t *testing.T) {
	// Redacting "aSECRET-VALUE" leaves "a***", itself a secret.
	r := redact.New(redact.Config{Values: []string{"a***", "SECRET-VALUE"}})
	if got := r.String("xaSECRET-VALUEx"); strings.Contains(got, "a***") || strings.Contains(got, "SECRET") {
		t.Errorf("got %q", got)
	}
}

func TestJSON(t *testing.T) {
	sec := "pa\"ss\nword\\<x>\u2028"
	r := redact.New(redact.Config{Values: []string{sec, "plain-secret"}})
	doc := map[string]any{
		"a": sec, "b": "pre " + sec + " post", "c": []any{"plain-secret", 1, true, nil},
		"d": map[string]any{"plain-secret": ghp, "pem": pemKey}, "e": "clean \"quoted\" \\ text",
	}
	for _, indent := range []string{"", "  "} {
		raw, err := json.MarshalIndent(doc, "", indent)
		if err != nil {
			t.Fatal(err)
		}
		out := r.JSON(raw)
		if !json.Valid(out) {
			t.Fatalf("invalid JSON after redaction:\n%s", out)
		}
		var back map[string]any
		if err := json.Unmarshal(out, &back); err != nil {
			t.Fatal(err)
		}
		want := map[string]any{
			"a": "***", "b": "pre *** post", "c": []any{"***", 1.0, true, nil},
			"d": map[string]any{"***": "***", "pem": "***"}, "e": "clean \"quoted\" \\ text",
		}
		if fmt.Sprint(back) != fmt.Sprint(want) {
			t.Errorf("indent %q: got %v\nwant %v", indent, back, want)
		}
		for _, leak := range []string{"plain-secret", "ghp_", "BEGIN RSA", "word"} {
			if bytes.Contains(out, []byte(leak)) {
				t.Errorf("indent %q: %q leaked: %s", indent, leak, out)
			}
		}
	}
	clean := []byte(`{"x":"nothing \"here\"","n":12}`)
	if got := r.JSON(clean); &got[0] != &clean[0] {
		t.Error("clean JSON was copied")
	}
	// Non-JSON and broken JSON are still redacted as text.
	for _, in := range []string{"plain-secret outside", `{"a":"plain-secret`, `x "\q plain-secret" y`} {
		if got := r.JSON([]byte(in)); bytes.Contains(got, []byte("plain-secret")) {
			t.Errorf("JSON(%q) = %q", in, got)
		}
	}
}

func TestWriterSplitSecrets(t *testing.T) {
	sec := "split-secret-value"
	r := redact.New(redact.Config{Values: []string{sec}})
	text := "start " + sec + " mid " + ghp + "\n" + pemKey + "\nline " + jwt + " end\n" + strings.Repeat("x", 3000) + sec + "\ntail " + akia
	want := r.String(text)
	for _, size := range []int{1, 2, 3, 7, 64, 1000, len(text)} {
		for _, jsonl := range []bool{false, true} {
			var out bytes.Buffer
			w := r.Writer(&out)
			if jsonl {
				w = r.JSONLinesWriter(&out)
			}
			for i := 0; i < len(text); i += size {
				if _, err := w.Write([]byte(text[i:min(len(text), i+size)])); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			if out.String() != want {
				t.Errorf("size %d json %v:\n got %q\nwant %q", size, jsonl, out.String(), want)
			}
		}
	}
}

func TestWriterLongLines(t *testing.T) {
	r := redact.New(redact.Config{Values: []string{"long-line-secret"}})
	var out bytes.Buffer
	w := r.Writer(&out)
	line := strings.Repeat("y", 200<<10) + "long-line-secret" + strings.Repeat("z", 200<<10)
	for i := 0; i < len(line); i += 1000 {
		w.Write([]byte(line[i:min(len(line), i+1000)]))
	}
	if out.Len() == 0 {
		t.Error("a line longer than the line cap was held whole")
	}
	w.Flush()
	if strings.Contains(out.String(), "long-line-secret") || out.Len() != len(line)-len("long-line-secret")+3 {
		t.Errorf("long line: leaked or wrong length %d", out.Len())
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, fmt.Errorf("disk full") }

func TestWriterError(t *testing.T) {
	w := redact.New(redact.Config{}).Writer(failWriter{})
	if _, err := w.Write([]byte("line\n")); err != nil {
		t.Fatalf("first write should be held: %v", err)
	}
	if err := w.Flush(); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("Flush error = %v", err)
	}
	if _, err := w.Write([]byte("more")); err == nil {
		t.Fatal("write after failure succeeded")
	}
}
