package step

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prodigy-action/prodigy-action/config"
	"github.com/prodigy-action/prodigy-action/interp"
)

// TestWriteFileStaysInWorktree plants symbolic links in the worktree that
// point outside it and checks that no write_file path reaches outside.
func TestWriteFileStaysInWorktree(t *testing.T) {
	t.Parallel()
	outside := t.TempDir()
	victim := filepath.Join(outside, "victim.txt")
	if err := os.WriteFile(victim, []byte("original"), 0o644); err != nil {
		t.Fatal(err)
	}
	wt := t.TempDir()
	mustSymlink(t, outside, filepath.Join(wt, "outdir"))
	mustSymlink(t, victim, filepath.Join(wt, "victim-link"))
	mustSymlink(t, "../../"+filepath.Base(outside), filepath.Join(wt, "rel-up"))
	if err := os.Mkdir(filepath.Join(wt, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	mustSymlink(t, "..", filepath.Join(wt, "sub", "up"))

	for _, path := range []string{
		"outdir/victim.txt", "outdir/new.txt", "victim-link", "rel-up/victim.txt",
		"sub/up/outdir/victim.txt", "${item.p}", "../x", "/tmp/x", "outdir/deep/new.txt",
	} {
		t.Run(path, func(t *testing.T) {
			st := config.Step{WriteFile: &config.WriteFile{Path: path, Content: "pwned", CreateDirs: true}}
			sc := &Context{Dir: wt, Vars: interp.Vars{"item": map[string]any{"p": "outdir/victim.txt"}}, Log: io.Discard}
			f := (&Runner{}).writeFile(st, sc)
			if f == nil {
				t.Fatalf("write_file %q succeeded", path)
			}
			if !f.Permanent || !strings.Contains(f.Message, "leaves the worktree") {
				t.Errorf("failure = %+v, want a permanent 'leaves the worktree' failure", f)
			}
			if b, _ := os.ReadFile(victim); string(b) != "original" {
				t.Fatalf("the file outside the worktree was changed: %q", b)
			}
			entries, _ := os.ReadDir(outside)
			if len(entries) != 1 {
				t.Fatalf("files appeared outside the worktree: %v", entries)
			}
		})
	}
}

func TestWriteFileInside(t *testing.T) {
	t.Parallel()
	wt := t.TempDir()
	if err := os.Mkdir(filepath.Join(wt, "real"), 0o755); err != nil {
		t.Fatal(err)
	}
	mustSymlink(t, "real", filepath.Join(wt, "alias")) // a link that stays inside is fine
	st := config.Step{WriteFile: &config.WriteFile{Path: "alias/${item.name}/out.txt", Content: "v=${item.name}", CreateDirs: true}}
	sc := &Context{Dir: wt, Vars: interp.Vars{"item": map[string]any{"name": "a"}}, Log: io.Discard}
	if f := (&Runner{}).writeFile(st, sc); f != nil {
		t.Fatalf("write_file: %v", f)
	}
	if b, err := os.ReadFile(filepath.Join(wt, "real", "a", "out.txt")); err != nil || string(b) != "v=a" {
		t.Fatalf("got %q, %v", b, err)
	}
}

// TestStepEnvPlaceholders: env values receive the item's value as data.
func TestStepEnvPlaceholders(t *testing.T) {
	t.Parallel()
	st := config.Step{Env: map[string]string{"NAME": "${item.name}", "LIT": "$${item.name} $HOME"}}
	env, f := interpolateEnv(st, interp.Vars{"item": map[string]any{"name": "$(touch pwned)"}})
	if f != nil {
		t.Fatal(f)
	}
	want := []string{"LIT=${item.name} $HOME", "NAME=$(touch pwned)"}
	if strings.Join(env, "|") != strings.Join(want, "|") {
		t.Fatalf("env = %q, want %q", env, want)
	}
	if _, f := interpolateEnv(config.Step{Env: map[string]string{"X": "${itme.name}"}}, interp.Vars{"item": 1}); f == nil || !f.Permanent {
		t.Fatalf("unknown variable in env: %+v", f)
	}
}

func mustSymlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		if errors.Is(err, os.ErrPermission) {
			t.Skip("symlinks not permitted")
		}
		t.Fatal(err)
	}
}
