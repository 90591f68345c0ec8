package gitops

import (
	"os"
	"path/filepath"
)

// Owner is the user an agent runs as when it is not the engine's: the
// agent's work tree and repository are made theirs.
type Owner struct {
	UID, GID int
}

// chownTree makes owner the owner of dir and everything under it (symbolic
// links themselves, never their targets), dir itself last and mode 0700.
// While the walk runs dir is the engine's and closed (confine), so no
// other user — an earlier agent that owns files inside, or an agent sharing
// the uid — can swap a directory for a symbolic link under the walk and
// make root change the owner of a file elsewhere; and afterwards no other
// agent can enter the worktree.
func chownTree(dir string, owner Owner) error {
	if err := confine(dir); err != nil {
		return err
	}
	if err := filepath.WalkDir(dir, func(p string, _ os.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		return os.Lchown(p, owner.UID, owner.GID)
	}); err != nil {
		return err
	}
	return os.Lchown(dir, owner.UID, owner.GID)
}

// confine makes dir (not what is in it) the engine's, mode 0700: no other
// user can reach anything inside, whatever they own there. dir's parent
// is the engine's, so dir itself cannot be swapped.
func confine(dir string) error {
	if err := os.Lchown(dir, os.Geteuid(), os.Getegid()); err != nil {
		return err
	}
	return os.Chmod(dir, 0o700)
}
