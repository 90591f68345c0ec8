// Package ghactiontest reads an action's output the way the GitHub Actions
// runner does, so tests can check which workflow commands it would run.
package ghactiontest

import (
	"strings"
	"unicode"
)

// Command is one workflow command the runner would process.
type Command struct {
	Name  string
	Props map[string]string
	Data  string
	Line  int // 1-based line of the output
}

// Parse returns the workflow commands the runner would process in output
// (one step's stdout and stderr): a line whose first non-blank characters
// are `::name props::data` (props "k=v,k=v"), else the legacy
// `##[name props]data` anywhere in a line (props "k=v;k=v"). After
// `::stop-commands::TOKEN` no command is processed until a line
// `::TOKEN::`; the stop and resume lines themselves are not returned.
// Data is returned unescaped (%25, %0D, %0A).
func Parse(output string) []Command {
	var out []Command
	stopToken := ""
	for i, line := range strings.Split(output, "\n") {
		line = strings.TrimSuffix(line, "\r")
		c, ok := parseV2(line)
		if !ok {
			c, ok = parseV1(line)
		}
		if !ok {
			continue
		}
		c.Line = i + 1
		switch {
		case stopToken != "":
			if c.Name == stopToken {
				stopToken = ""
			}
		case c.Name == "stop-commands":
			if c.Data != "" {
				stopToken = c.Data
			}
		default:
			out = append(out, c)
		}
	}
	return out
}

func parseV2(line string) (Command, bool) {
	t := strings.TrimLeftFunc(line, unicode.IsSpace)
	if !strings.HasPrefix(t, "::") {
		return Command{}, false
	}
	rest := t[2:]
	end := strings.Index(rest, "::")
	if end < 0 {
		return Command{}, false
	}
	section, data := rest[:end], rest[end+2:]
	name, props, _ := strings.Cut(section, " ")
	if name == "" {
		return Command{}, false
	}
	return Command{Name: name, Props: parseProps(props, ","), Data: unescape(data)}, true
}

func parseV1(line string) (Command, bool) {
	start := strings.Index(line, "##[")
	if start < 0 {
		return Command{}, false
	}
	rest := line[start+3:]
	end := strings.Index(rest, "]")
	if end < 0 {
		return Command{}, false
	}
	section, data := rest[:end], rest[end+1:]
	name, props, _ := strings.Cut(section, " ")
	if name == "" {
		return Command{}, false
	}
	return Command{Name: name, Props: parseProps(props, ";"), Data: unescape(data)}, true
}

func parseProps(s, sep string) map[string]string {
	m := map[string]string{}
	for _, kv := range strings.Split(s, sep) {
		if k, v, ok := strings.Cut(strings.TrimSpace(kv), "="); ok && k != "" {
			m[k] = unescapeProp(v)
		}
	}
	return m
}

func unescape(s string) string {
	return strings.NewReplacer("%0D", "\r", "%0A", "\n", "%25", "%").Replace(s)
}

func unescapeProp(s string) string {
	return strings.NewReplacer("%0D", "\r", "%0A", "\n", "%3A", ":", "%2C", ",", "%25", "%").Replace(s)
}
