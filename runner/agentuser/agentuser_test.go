package agentuser

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/prodigy-action/prodigy-action/gitops"
)

// Without a spec agents run as the engine: no Users, and its methods do
// nothing.
func TestNoSpecIsTheEnginesUser(t *testing.T) {
	u, err := New("", 4, t.TempDir())
	if err != nil || u != nil {
		t.Fatalf("New(\"\") = %v, %v; want nil, nil", u, err)
	}
	id, give, err := u.Take("a-1")
	if id != nil || err != nil {
		t.Fatalf("Take on nil = %v, %v", id, err)
	}
	give()
	if err := u.Prepare(context.Background(), t.TempDir()); err != nil {
		t.Fatal(err)
	}
	if g := GitOptions(gitops.Options{}, ""); len(g.Config) != 0 {
		t.Fatalf("GitOptions without a user = %+v, want no configuration", g.Config)
	}
}

// Each attempt gets a fresh, empty HOME of its user's, which is gone once
// it is given back: nothing an earlier agent left in a HOME reaches the
// next one.
func TestTakeGivesAFreshHomeOfTheAgentsOwn(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the HOME is given to another user")
	}
	root := t.TempDir()
	u, err := New("70100-70101", 2, root)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, HomesName), 0o711); err != nil {
		t.Fatal(err)
	}
	id, give, err := u.Take("a-1")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(id.Home, "planted"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(id.Home)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	if int(st.Uid) != id.Owner.UID || id.Owner.UID < 70100 || id.Owner.UID > 70101 || fi.Mode().Perm() != 0o700 {
		t.Fatalf("home owned by %d mode %v, identity %+v; want the agent's uid, 0700", st.Uid, fi.Mode().Perm(), id.Owner)
	}
	other, give2, err := u.Take("a-2")
	if err != nil {
		t.Fatal(err)
	}
	if other.Owner.UID == id.Owner.UID {
		t.Fatalf("two agents at once share uid %d", id.Owner.UID)
	}
	give2()
	give()
	if _, err := os.Stat(id.Home); !os.IsNotExist(err) {
		t.Fatalf("home %s still there after give back (%v)", id.Home, err)
	}
	again, give3, err := u.Take("a-1")
	if err != nil {
		t.Fatal(err)
	}
	defer give3()
	if entries, _ := os.ReadDir(again.Home); len(entries) != 0 {
		t.Fatalf("a HOME taken again holds %d file(s) of an earlier agent", len(entries))
	}
	if g := GitOptions(gitops.Options{}, "70100-70101"); len(g.Config) != 1 || g.Config[0].Key != "safe.directory" {
		t.Fatalf("GitOptions with a user = %+v, want safe.directory", g.Config)
	}
}
