package jobstore

import (
	"fmt"
	"os"
	"path/filepath"
)

// OpenEvents opens the job's event log for appending, creating it and its
// directory. The caller owns the format (one JSON object per line) and
// closes the file.
func OpenEvents(p Paths) (*os.File, error) {
	path := p.Events()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("create %s: %w", filepath.Dir(path), err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open event log: %w", err)
	}
	return f, nil
}
