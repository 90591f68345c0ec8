package redact_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/prodigy-action/prodigy-action/redact"
)

// FuzzRedact checks that redaction never panics and that no declared
// secret survives String, JSON (of the JSON-encoded text) or the streaming
// Writer, whatever the Write boundaries.
func FuzzRedact(f *testing.F) {
	f.Add("secret-one", "other\"two\n", "x secret-one y other\"two\n z", 3)
	f.Add("a***", "SECRET-VALUE", "xaSECRET-VALUEx", 1)
	f.Add("abcd", "bcdefg", "abcdefg abcd", 2)
	f.Add("ghp_", "-----BEGIN", "-----BEGIN RSA PRIVATE KEY-----\nabc\n"+ghp, 5)
	f.Fuzz(func(t *testing.T, s1, s2, text string, split int) {
		r := redact.New(redact.Config{Values: []string{s1, s2}, Environ: []string{"MY_TOKEN=" + s2}})
		var secrets []string
		for _, s := range []string{s1, s2} {
			if len(s) >= redact.MinValue {
				secrets = append(secrets, s)
			}
		}
		check := func(where, out string) {
			for _, s := range secrets {
				if strings.Contains(out, s) {
					t.Fatalf("%s: secret %q survives in %q (input %q)", where, s, out, text)
				}
			}
		}
		check("String", r.String(text))

		enc, _ := json.Marshal(map[string]string{"k": text, text: "v"})
		red := r.JSON(enc)
		if !json.Valid(red) {
			t.Fatalf("JSON output invalid: %s", red)
		}
		var back map[string]string
		if err := json.Unmarshal(red, &back); err != nil {
			t.Fatal(err)
		}
		for k, v := range back {
			check("JSON key", k)
			check("JSON value", v)
		}
		check("JSON raw", string(r.JSON([]byte(text))))

		if split <= 0 {
			split = 1
		}
		split = split%17 + 1
		for _, jsonl := range []bool{false, true} {
			var out bytes.Buffer
			w := r.Writer(&out)
			if jsonl {
				w = r.JSONLinesWriter(&out)
			}
			for i := 0; i < len(text); i += split {
				w.Write([]byte(text[i:min(len(text), i+split)]))
			}
			w.Close()
			if !jsonl {
				check("Writer", out.String())
			} else if !strings.Contains(text, "\"") {
				check("JSONLinesWriter", out.String())
			}
		}
	})
}
