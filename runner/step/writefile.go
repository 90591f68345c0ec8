package step

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/prodigy-action/prodigy-action/config"
	"github.com/prodigy-action/prodigy-action/dlq"
	"github.com/prodigy-action/prodigy-action/gitops"
	"github.com/prodigy-action/prodigy-action/interp"
)

func (s *Runner) writeFile(st config.Step, sc *Context) *Failure {
	wf := st.WriteFile
	rel, err := interp.Interpolate(wf.Path, sc.Vars)
	if err != nil {
		return &Failure{Type: dlq.ErrorType{Kind: dlq.ValidationFailed}, Message: fmt.Sprintf("interpolate write_file path: %v", err), Permanent: true}
	}
	if !filepath.IsLocal(rel) {
		return &Failure{Type: dlq.ErrorType{Kind: dlq.ValidationFailed}, Message: fmt.Sprintf("write_file path %q leaves the worktree", rel), Permanent: true}
	}
	content, err := interp.Interpolate(wf.Content, sc.Vars)
	if err != nil {
		return &Failure{Type: dlq.ErrorType{Kind: dlq.ValidationFailed}, Message: fmt.Sprintf("interpolate write_file content: %v", err), Permanent: true}
	}
	mode := wf.Mode
	if mode == 0 {
		mode = 0o644
	}
	if err := writeInside(sc.Dir, rel, []byte(content), mode, wf.CreateDirs, sc.Owner); err != nil {
		if errors.Is(err, errEscapes) {
			return &Failure{Type: dlq.ErrorType{Kind: dlq.ValidationFailed}, Message: fmt.Sprintf("write_file %s: %v", rel, err), Permanent: true}
		}
		return &Failure{Type: dlq.ErrorType{Kind: dlq.CommandFailed, ExitCode: 1}, Message: fmt.Sprintf("write_file %s: %v", rel, err)}
	}
	fmt.Fprintf(sc.Log, "wrote %s (%d bytes)\n", rel, len(content))
	return nil
}

// errEscapes marks a write_file path that resolves outside the worktree.
var errEscapes = errors.New("the path leaves the worktree (through .., an absolute path or a symbolic link)")

// writeInside writes data to rel under dir through an os.Root, which
// resolves every component (symbolic links included) inside dir: nothing
// outside the worktree can be created, truncated or followed.
//
// With an owner the file, and directories it created, become theirs.
func writeInside(dir, rel string, data []byte, mode os.FileMode, createDirs bool, owner *gitops.Owner) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("open worktree: %w", err)
	}
	defer root.Close()
	escapes := func(err error) error {
		var pe *os.PathError
		if errors.As(err, &pe) && strings.Contains(pe.Err.Error(), "escapes from parent") {
			return fmt.Errorf("%w: %v", errEscapes, err)
		}
		return err
	}
	if createDirs {
		if d := filepath.Dir(rel); d != "." {
			if err := root.MkdirAll(d, 0o755); err != nil {
				return escapes(err)
			}
		}
	}
	f, err := root.OpenFile(rel, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode)
	if err != nil {
		return escapes(err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil || owner == nil {
		return err
	}
	for p := rel; p != "." && p != ""; p = filepath.Dir(p) {
		if err := root.Lchown(p, owner.UID, owner.GID); err != nil {
			return err
		}
	}
	return nil
}
