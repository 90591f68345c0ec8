package report

import (
	"strings"
	"testing"
)

func TestTraceIDLine(t *testing.T) {
	t.Parallel()
	in := Input{Title: "wf", JobID: "job-1", Status: "completed", Total: 1, Successful: 1}
	for _, out := range []string{Summary(in), Comment(in)} {
		if strings.Contains(out, "trace") {
			t.Errorf("untraced job shows a trace:\n%s", out)
		}
		if !strings.Contains(out, "Job `job-1`\n\n") {
			t.Errorf("job line changed:\n%s", out)
		}
	}
	in.TraceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	for _, out := range []string{Summary(in), Comment(in)} {
		if !strings.Contains(out, "Job `job-1` · trace `4bf92f3577b34da6a3ce929d0e0e4736`\n\n") {
			t.Errorf("no trace id line:\n%s", out)
		}
	}
	// A backtick cannot end the code span early.
	in.TraceID = "`|<b>x</b>"
	for _, line := range strings.Split(Summary(in), "\n") {
		if strings.HasPrefix(line, "Job ") && strings.Count(line, "`") != 4 {
			t.Errorf("trace id breaks its code span: %s", line)
		}
	}
}
