package cmdutil

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"
)

// AliasFlags makes fs accept each alias as the flag it maps to (Prodigy's
// spellings: --workflow-id for --job-id, --max-parallel for --parallel).
func AliasFlags(fs *pflag.FlagSet, aliases map[string]string) {
	next := fs.GetNormalizeFunc()
	fs.SetNormalizeFunc(func(fs *pflag.FlagSet, name string) pflag.NormalizedName {
		if to, ok := aliases[name]; ok {
			name = to
		}
		return next(fs, name)
	})
}

// JobIDFlag adds --job-id (alias --workflow-id).
func JobIDFlag(fs *pflag.FlagSet, p *string, usage string) {
	fs.StringVar(p, "job-id", "", usage+" (alias --workflow-id)")
	AliasFlags(fs, map[string]string{"workflow-id": "job-id"})
}

// Confirm asks prompt on stderr and reads one answer line from stdin.
// "y" or "yes" (any case) confirms. Any other answer aborts with exit 1;
// no answer at all (EOF, e.g. stdin is not a terminal) is a usage error
// (exit 2) naming skipFlag, the flag that skips the question. Nothing is
// changed in either case.
func (f *Factory) Confirm(prompt, skipFlag string) error {
	fmt.Fprintf(f.ErrOut, "%s [y/N] ", prompt)
	line, err := "", io.EOF
	if f.In != nil {
		line, err = bufio.NewReader(f.In).ReadString('\n')
	}
	if err != nil && line == "" {
		fmt.Fprintln(f.ErrOut)
		return UsageErrorf("no confirmation on stdin; pass %s to run without asking", skipFlag)
	}
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return nil
	}
	fmt.Fprintln(f.ErrOut, "aborted: nothing was deleted")
	return &ExitError{Code: ExitFailed}
}

// WriteOutput streams write into file ("-" = stdout) through a temporary
// file in the same directory, renamed into place only when complete. An
// empty file name or an unwritable directory is a UsageError. Secrets are
// redacted on the way (JSON-aware when jsonText, else as text).
func (f *Factory) WriteOutput(file string, jsonText bool, write func(io.Writer) error) (err error) {
	switch file {
	case "":
		return UsageErrorf(`output file must not be empty (use "-" for stdout)`)
	case "-":
		return write(f.Out)
	}
	tmp, err := os.CreateTemp(filepath.Dir(file), "."+filepath.Base(file)+".tmp-*")
	if err != nil {
		return UsageErrorf("cannot write %s: %w", file, err)
	}
	defer func() {
		if err != nil {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	rw := f.Redactor().Writer(tmp)
	if jsonText {
		rw = f.Redactor().JSONLinesWriter(tmp)
	}
	if err = write(rw); err != nil {
		return fmt.Errorf("write %s: %w", file, err)
	}
	if err = rw.Flush(); err != nil {
		return fmt.Errorf("write %s: %w", file, err)
	}
	if err = tmp.Chmod(0o644); err != nil {
		return fmt.Errorf("write %s: %w", file, err)
	}
	if err = tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", file, err)
	}
	if err = os.Rename(tmp.Name(), file); err != nil {
		return fmt.Errorf("write %s: %w", file, err)
	}
	return nil
}
