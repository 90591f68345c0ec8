package config_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/prodigy-action/prodigy-action/config"
)

func TestSecretsKey(t *testing.T) {
	t.Parallel()
	const head = "map:\n  input: items.json\n  agent_template:\n    - shell: echo hi\n"
	w, err := config.Parse("w.yml", []byte("secrets: [DEPLOY_HOOK, db_url]\n"+head))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"DEPLOY_HOOK", "db_url"}; !reflect.DeepEqual(w.Secrets, want) {
		t.Errorf("Secrets = %q, want %q", w.Secrets, want)
	}
	bad := []struct{ yaml, want string }{
		{"secrets: DEPLOY_HOOK\n", "w.yml:1:10: secrets: must be a list"},
		{"secrets: [\"A B\"]\n", "w.yml:1:11: secrets[0]: must be an environment variable name"},
		{"secrets: [{a: 1}]\n", "secrets[0]: must be a string"},
		{"secrets: [\"1X\"]\n", "secrets[0]: must be an environment variable name"},
	}
	for _, b := range bad {
		_, err := config.Parse("w.yml", []byte(b.yaml+head))
		if err == nil || !strings.Contains(err.Error(), b.want) {
			t.Errorf("%q: err = %v, want %q", b.yaml, err, b.want)
		}
	}
}
