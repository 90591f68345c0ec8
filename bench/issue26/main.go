// Command issue26 summarises a run of bench/issue26/run.sh: every figure of
// issue 26 as the median of the repeated runs (with their range), the
// ratios each target is stated in, whether it is met, and the load average
// the runs saw. It reads only the JSON the benchmarks wrote; it measures
// nothing itself.
//
//	go run ./bench/issue26 /tmp/issue26
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

func main() {
	dir := "/tmp/issue26"
	if len(os.Args) > 1 {
		dir = os.Args[1]
	}
	if err := summarise(os.Stdout, dir); err != nil {
		fmt.Fprintln(os.Stderr, "issue26:", err)
		os.Exit(1)
	}
}

// summarise writes the report for the run in dir.
func summarise(w io.Writer, dir string) error {
	commit, err := os.ReadFile(filepath.Join(dir, "commit"))
	if err != nil {
		return fmt.Errorf("not a run of bench/issue26/run.sh: %w", err)
	}
	loads, err := readLoads(filepath.Join(dir, "progress.log"))
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "Issue 26, every figure: commit %s, medians of the runs (range in brackets); load average (1 min) %s over the runs.\n",
		strings.TrimSpace(string(commit))[:min(12, len(strings.TrimSpace(string(commit))))], loads.all())
	for _, section := range []func(io.Writer, string, loadLog) error{commitsSection, dlqSection, yardstickSection, gatherSection, millionSection} {
		fmt.Fprintln(w)
		if err := section(w, dir, loads); err != nil {
			return err
		}
	}
	return nil
}

// runs reads every OUT/<prefix>-<r>.json into a value of T, in order of r;
// a run whose JSON is missing or unreadable is reported as not counted.
func runs[T any](w io.Writer, dir, prefix string) ([]T, []string) {
	paths, _ := filepath.Glob(filepath.Join(dir, prefix+"-*.json"))
	re := regexp.MustCompile("^" + regexp.QuoteMeta(prefix) + `-\d+\.json$`)
	var out []T
	var names []string
	for _, p := range paths {
		if !re.MatchString(filepath.Base(p)) {
			continue
		}
		var v T
		data, err := os.ReadFile(p)
		if err == nil {
			err = json.Unmarshal(data, &v)
		}
		if err != nil {
			fmt.Fprintf(w, "(%s not counted: %v)\n", filepath.Base(p), err)
			continue
		}
		out = append(out, v)
		names = append(names, strings.TrimSuffix(filepath.Base(p), ".json"))
	}
	return out, names
}

// stat is the median of some figures and their range.
type stat struct{ med, lo, hi float64 }

func of(v []float64) stat {
	if len(v) == 0 {
		return stat{}
	}
	s := slices.Clone(v)
	slices.Sort(s)
	m := s[len(s)/2]
	if len(s)%2 == 0 {
		m = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return stat{m, s[0], s[len(s)-1]}
}

// f formats a stat with the given precision: "1.23 (1.10–1.40)".
func (s stat) f(prec int) string {
	return fmt.Sprintf("%.*f (%.*f–%.*f)", prec, s.med, prec, s.lo, prec, s.hi)
}

// met says whether a median is within a target (≤).
func met(v, target float64) string {
	if v > 0 && v <= target {
		return "met"
	}
	return "**not met**"
}

// collect maps each run to a figure.
func collect[T any](rs []T, f func(T) float64) []float64 {
	out := make([]float64, 0, len(rs))
	for _, r := range rs {
		out = append(out, f(r))
	}
	return out
}

// loadLog is the load average the runs saw, from progress.log: for each
// run, the 1-minute load at its start and, once it ended, at its end.
type loadLog map[string][]float64

var loadLine = regexp.MustCompile(`^\S+ load ([\d.]+) [\d.]+ [\d.]+ (start|end) (\S+)`)

func readLoads(path string) (loadLog, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("no progress.log: %w", err)
	}
	defer f.Close()
	l := loadLog{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		m := loadLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		var v float64
		fmt.Sscan(m[1], &v)
		if m[2] == "start" {
			l[m[3]] = []float64{v}
		} else {
			l[m[3]] = append(l[m[3]], v)
		}
	}
	return l, sc.Err()
}

// of gives the range of the load over the named runs.
func (l loadLog) of(names []string) string {
	lo, hi := -1.0, 0.0
	for _, n := range names {
		for _, v := range l[n] {
			if lo < 0 || v < lo {
				lo = v
			}
			hi = max(hi, v)
		}
	}
	if lo < 0 {
		return "?"
	}
	return fmt.Sprintf("%.1f–%.1f", lo, hi)
}

func (l loadLog) all() string {
	names := make([]string, 0, len(l))
	for n := range l {
		names = append(names, n)
	}
	return l.of(names)
}

// none notes a section with no runs to read.
func none(w io.Writer, what string) error {
	fmt.Fprintf(w, "%s: no runs in this directory.\n", what)
	return nil
}
