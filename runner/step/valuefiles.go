package step

import (
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/prodigy-action/prodigy-action/gitops"
)

// valueFiles is where steps read the values that do not go through the
// environment: PRODIGY_ITEM_FILE and shell values too large for it. It is
// one private directory per job (0700, made on first use under the system's
// temporary directory, like os.MkdirTemp), holding one 0600 file per value
// per step run, each removed when its step ends; close removes the
// directory when the job ends. One directory per job rather than per step
// saves a mkdir and an rmdir for every step. The zero value is ready to use.
type valueFiles struct {
	mu  sync.Mutex
	dir string
	seq atomic.Uint64
}

// write creates a new file holding content for the step run numbered run
// and returns its path. Names get a random part (os.CreateTemp): a step
// cannot plant a file where a later step's value will go.
//
// With an owner (agents running as another user) the file is theirs and
// the directory searchable by them (0711: they can open a file whose name
// they are given, not list the others).
func (v *valueFiles) write(run uint64, name, content string, owner *gitops.Owner) (string, error) {
	dir, err := v.directory()
	if err != nil {
		return "", err
	}
	if owner != nil {
		if err := os.Chmod(dir, 0o711); err != nil {
			return "", err
		}
	}
	f, err := os.CreateTemp(dir, strconv.FormatUint(run, 10)+"-*-"+name)
	if err != nil {
		return "", err
	}
	_, err = f.WriteString(content)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && owner != nil {
		err = os.Lchown(f.Name(), owner.UID, owner.GID)
	}
	if err != nil {
		_ = os.Remove(f.Name())
		return "", err
	}
	return f.Name(), nil
}

// directory returns the job's directory, making it first (again, if a
// step's cleanup or anything else removed it).
func (v *valueFiles) directory() (string, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.dir != "" {
		if fi, err := os.Lstat(v.dir); err == nil && fi.IsDir() {
			return v.dir, nil
		}
	}
	dir, err := os.MkdirTemp("", "prodigy-values-")
	if err != nil {
		return "", fmt.Errorf("create a directory for step values: %w", err)
	}
	v.dir = dir
	return dir, nil
}

// close removes the directory and anything left in it.
func (v *valueFiles) close() {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.dir != "" {
		_ = os.RemoveAll(v.dir)
		v.dir = ""
	}
}
