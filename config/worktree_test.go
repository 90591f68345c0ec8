package config_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/prodigy-action/prodigy-action/config"
)

const minimalMap = "map:\n  input: items.json\n  agent_template: [{shell: x}]\n"

func TestWorktreeSparse(t *testing.T) {
	t.Parallel()
	_, err := config.Parse("wf.yml", []byte("worktree:\n  sparse: [a/, services/api, a]\n"+minimalMap))
	if err == nil || !strings.Contains(err.Error(), `wf.yml:2:30: worktree.sparse[2]: "a" is listed twice`) {
		t.Fatalf("duplicate: err = %v", err)
	}
	w, err := config.Parse("wf.yml", []byte("worktree:\n  sparse:\n    - a/\n    - services/api\n"+minimalMap))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"a", "services/api"}; !reflect.DeepEqual(w.Worktree.Sparse, want) {
		t.Errorf("sparse = %q, want %q", w.Worktree.Sparse, want)
	}
	if p := w.Worktree.SparsePos; len(p) != 2 || p[1].Line != 4 || p[1].Col != 7 {
		t.Errorf("positions = %+v", p)
	}
	w, err = config.Parse("wf.yml", []byte(minimalMap))
	if err != nil || w.Worktree.Sparse != nil {
		t.Errorf("no worktree key: sparse = %q, err = %v", w.Worktree.Sparse, err)
	}
}

func TestWorktreeErrors(t *testing.T) {
	t.Parallel()
	tests := []struct{ src, want string }{
		{"worktree:\n  spares: [a]\n", `wf.yml:2:3: worktree.spares: unknown key "spares"; accepted keys here: sparse`},
		{"worktree: [a]\n", `wf.yml:1:11: worktree: must be a mapping`},
		{"worktree:\n  sparse: a/\n", `wf.yml:2:11: worktree.sparse: must be a list, got a string`},
		{"worktree:\n  sparse: [1]\n", `wf.yml:2:12: worktree.sparse[0]: must be a string, got an integer`},
		{"worktree:\n  sparse: [/etc]\n", `wf.yml:2:12: worktree.sparse[0]: must be relative`},
		{"worktree:\n  sparse: [../up]\n", `worktree.sparse[0]: ".." is not allowed`},
		{"worktree:\n  sparse: [a/../../b]\n", `worktree.sparse[0]: not a clean path`},
		{"worktree:\n  sparse: [\"src/*\"]\n", `worktree.sparse[0]: cone mode takes directory names, not patterns`},
		{"worktree:\n  sparse: [\".\"]\n", `worktree.sparse[0]: must name a directory`},
		{"worktree:\n  sparse: [a/.git]\n", `worktree.sparse[0]: ".git" is not allowed`},
		{"worktree:\n  sparse: [\"a\\nb\"]\n", `worktree.sparse[0]: control characters are not allowed`},
	}
	for _, tt := range tests {
		_, err := config.Parse("wf.yml", []byte(tt.src+minimalMap))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: err = %v, want %q", tt.src, err, tt.want)
		}
	}
}
