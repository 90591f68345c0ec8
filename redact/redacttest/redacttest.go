// Package redacttest checks outputs for secrets in tests of the sinks.
package redacttest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// AssertNoSecrets reports an error on t for every secret text holds.
func AssertNoSecrets(t testing.TB, where, text string, secrets ...string) {
	t.Helper()
	for _, s := range secrets {
		if strings.Contains(text, s) {
			t.Errorf("%s holds secret %q:\n%s", where, s, text)
		}
	}
}

// AssertNoSecretFiles checks every file under dir (worktrees aside) with
// AssertNoSecrets and returns how many files it read.
func AssertNoSecretFiles(t testing.TB, dir string, secrets ...string) int {
	t.Helper()
	n := 0
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.Contains(p, string(filepath.Separator)+"worktrees"+string(filepath.Separator)) {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		n++
		AssertNoSecrets(t, p, string(data), secrets...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}
