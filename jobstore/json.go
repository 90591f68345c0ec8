package jobstore

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/prodigy-action/prodigy-action/internal/fsx"
)

// filePerm is the mode of every file the store writes: state files may hold
// captured setup output, so only the owner reads them.
const filePerm = 0o600

// writeFile creates path's directory and replaces path atomically and
// durably (fsx.WriteFile).
func writeFile(path string, data []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	return fsx.WriteFile(path, data, filePerm)
}

// writeJSON marshals v with indentation and writes it atomically.
func writeJSON(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", path, err)
	}
	return writeFile(path, append(data, '\n'))
}

// readJSON decodes the JSON file at path into v. A missing file is an
// error wrapping fs.ErrNotExist.
func readJSON(path string, v any) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("decode %s: %w", path, err)
	}
	return nil
}

// SaveWorkflowCopy keeps the workflow file of a job as it was when the job
// started, so a resume still works when the original is gone.
func SaveWorkflowCopy(p Paths, data []byte) error { return writeFile(p.WorkflowCopy(), data) }
