package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"unicode"

	"github.com/prodigy-action/prodigy-action/dlq"
	"github.com/prodigy-action/prodigy-action/runner"
)

// resolveDLQJob picks the job a dlq subcommand works on. With jobID set it
// is the job of that id with a DLQ under $PRODIGY_HOME/dlq (or, when it has
// none, the job of that id under state/, whose DLQ is then empty); without
// it, the only job that has a DLQ. No match, several jobs without --job-id,
// or one id in several repositories are usage errors (exit 2) that list the
// jobs there are.
func resolveDLQJob(a *app, jobID string) (runner.Paths, error) {
	home, err := a.home()
	if err != nil {
		return runner.Paths{}, err
	}
	jobs, err := runner.DLQJobs(home)
	if err != nil {
		return runner.Paths{}, err
	}
	root := filepath.Join(home, "dlq")
	if jobID == "" {
		switch len(jobs) {
		case 0:
			return runner.Paths{}, usageErrf("no job has a dead letter queue under %s", root)
		case 1:
			return jobs[0], nil
		}
		return runner.Paths{}, usageErrf("%d jobs have a dead letter queue; choose one with --job-id:%s", len(jobs), jobList(jobs))
	}
	var match []runner.Paths
	for _, j := range jobs {
		if j.JobID == jobID {
			match = append(match, j)
		}
	}
	if len(match) == 0 {
		match = stateJobs(home, jobID)
	}
	switch len(match) {
	case 0:
		if len(jobs) == 0 {
			return runner.Paths{}, usageErrf("no dead letter queue for job %q: no job has one under %s", jobID, root)
		}
		return runner.Paths{}, usageErrf("no dead letter queue for job %q; jobs with one:%s", jobID, jobList(jobs))
	case 1:
		return match[0], nil
	}
	return runner.Paths{}, usageErrf("job id %q exists in %d repositories:%s", jobID, len(match), jobList(match))
}

// stateJobs finds jobs that ran (state/<repo>/jobs/<id>) but dead-lettered nothing.
func stateJobs(home, jobID string) []runner.Paths {
	jobs, _ := runner.StateJobs(home)
	var refs []runner.Paths
	for _, j := range jobs {
		if j.JobID == jobID {
			refs = append(refs, j)
		}
	}
	return refs
}

func jobList(jobs []runner.Paths) string {
	var b strings.Builder
	for _, j := range jobs {
		fmt.Fprintf(&b, "\n  %s (repo %s)", j.JobID, j.Repo)
	}
	return b.String()
}

// openDLQ resolves the job and opens its store; store warnings go to stderr.
func openDLQ(a *app, jobID string) (*dlq.Store, runner.Paths, error) {
	ref, err := resolveDLQJob(a, jobID)
	if err != nil {
		return nil, ref, err
	}
	s, err := dlq.Open(ref.DLQRoot(), ref.JobID, dlq.Options{Warn: func(m string) { fmt.Fprintf(a.stderr, "warning: %s\n", m) }})
	if err != nil {
		return nil, ref, usageErr(err)
	}
	return s, ref, nil
}

// confirm asks prompt on stderr and reads one answer line from stdin.
// "y" or "yes" (any case) confirms. Any other answer aborts with exit 1;
// no answer at all (EOF, e.g. stdin is not a terminal) is a usage error
// (exit 2) asking for --yes. Nothing is changed in either case.
func confirm(a *app, prompt string) error {
	fmt.Fprintf(a.stderr, "%s [y/N] ", prompt)
	var line string
	var err error
	if a.stdin != nil {
		line, err = bufio.NewReader(a.stdin).ReadString('\n')
	} else {
		err = io.EOF
	}
	if err != nil && line == "" {
		fmt.Fprintln(a.stderr)
		return usageErrf("no confirmation on stdin; pass --yes to run without asking")
	}
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return nil
	}
	fmt.Fprintln(a.stderr, "aborted: nothing was deleted")
	return silentExit(exitJobFailed)
}

// cell renders a value for a table cell: quoted when it holds control
// characters, tabs or leading/trailing spaces, so rows stay one line.
func cell(s string) string {
	if s == "" {
		return "-"
	}
	if strings.TrimSpace(s) != s || strings.IndexFunc(s, func(r rune) bool { return unicode.IsControl(r) || r == unicode.ReplacementChar }) >= 0 {
		return strconv.Quote(s)
	}
	return s
}

// errEmptyOutputPath rejects an empty FILE argument (use "-" for stdout).
var errEmptyOutputPath = errors.New(`output file must not be empty (use "-" for stdout)`)
