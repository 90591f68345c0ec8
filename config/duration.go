package config

import (
	"fmt"
	"regexp"
	"strconv"
	"time"
)

// durationForms is the help text of every duration error.
const durationForms = "use a number followed by a unit (ns, us, ms, s, m, h) with no spaces, e.g. 500ms, 2s, 2m, 1h30m"

// goDuration matches Go duration syntax without a sign: one or more
// number+unit pairs.
var goDuration = regexp.MustCompile(`^([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h)(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))*$`)

// ParseDuration parses a workflow duration: Go syntax such as "500ms",
// "2s", "2m" or "1h30m", or "0". Negative values, bare numbers other than 0,
// spaces and words ("1 second", "2 minutes") are errors that list the
// accepted forms.
func ParseDuration(s string) (time.Duration, error) {
	if s == "0" {
		return 0, nil
	}
	if !goDuration.MatchString(s) {
		if _, err := strconv.ParseFloat(s, 64); err == nil {
			return 0, fmt.Errorf("invalid duration %q: a bare number has no unit; %s", s, durationForms)
		}
		return 0, fmt.Errorf("invalid duration %q: %s", s, durationForms)
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("invalid duration %q: %w; %s", s, err, durationForms)
	}
	return d, nil
}
