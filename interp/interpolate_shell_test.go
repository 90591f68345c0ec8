package interp

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// hostileValues are item values that would run `touch pwned` (in the
// script's working directory) if they were ever parsed as shell code.
var hostileValues = map[string]string{
	"command substitution":  "$(touch pwned)",
	"backticks":             "`touch pwned`",
	"single quote breakout": "'; touch pwned; '",
	"double quote breakout": `"; touch pwned; "`,
	"newline":               "ok\ntouch pwned",
	"backslashes":           `\'; touch pwned; \"\\`,
	"dollar brace":          "${HOME} $HOME ${item} $(( 1 + 1 ))",
	"ansi-c breakout":       `\'; touch pwned; $'`,
	"glob and spaces":       "*  two  spaces\ttab ?",
	"unicode":               "héllo ☃ \u202e ✓",
	"heredoc delimiter":     "EOF\ntouch pwned\nEOF",
	"leading dash":          "-n -e",
	"empty":                 "",
	"only quotes":           `'"'"'`,
	"subshell parens":       ") ; touch pwned ; (",
	"brace close":           "} ; touch pwned ; {",
}

// runBash runs script with bash -c in dir and the given extra environment.
func runBash(t *testing.T, dir, script string, env []string) (string, string, error) {
	t.Helper()
	cmd := exec.Command("bash", "-c", script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.String(), stderr.String(), err
}

func TestInterpolateShellHostileValues(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash not installed")
	}
	// Each template prints the value framed by < and >; want is what the
	// frame should contain given the value V.
	templates := []struct {
		name, script string
		want         func(v string) string
	}{
		{"unquoted", `printf '<%s>\n' ${item.v}`, same},
		{"double quoted", `printf '<%s>\n' "${item.v}"`, same},
		{"double quoted with text", `printf '<%s>\n' "pre ${item.v} post"`, around("pre ", " post")},
		{"single quoted", `printf '<%s>\n' '${item.v}'`, same},
		{"single quoted with text", `printf '<%s>\n' 'pre ${item.v} post'`, around("pre ", " post")},
		{"ansi-c quoted", `printf '<%s>\n' $'pre\t${item.v}'`, around("pre\t", "")},
		{"adjacent to quotes", `printf '<%s>\n' a"${item.v}"b'${item.v}'c${item.v}d`, func(v string) string { return "a" + v + "b" + v + "c" + v + "d" }},
		{"command substitution unquoted inside", `printf '<%s>\n' "$(printf '%s' ${item.v})"`, same},
		{"command substitution quoted inside", `printf '<%s>\n' "$(printf '%s' "${item.v}")"`, same},
		{"nested command substitution", `printf '<%s>\n' "$(echo "$(printf '%s' '${item.v}')")"`, same},
		{"backticks", "printf '<%s>\\n' \"`printf '%s' ${item.v}`\"", same},
		{"unquoted backticks", "x=`printf '%s' ${item.v}`; printf '<%s>\\n' \"$x\"", same},
		{"variable assignment", `x=${item.v}; printf '<%s>\n' "$x"`, same},
		{"bash default word unquoted", `printf '<%s>\n' ${UNSET_PRODIGY_TEST:-${item.v}}`, same},
		{"bash default word quoted", `printf '<%s>\n' "${UNSET_PRODIGY_TEST:-${item.v}}"`, same},
		{"heredoc", "cat <<EOF\n<${item.v}>\nEOF", same},
		{"heredoc strip tabs", "cat <<-END\n\t<${item.v}>\n\tEND", same},
		{"heredoc then more script", "cat <<EOF | sed 's/^/</'\n${item.v}>\nEOF\nprintf '%s\\n' done", func(v string) string { return v + ">\ndone" }},
		{"comment with apostrophe before", "# don't stop\nprintf '<%s>\\n' ${item.v}", same},
		{"if and subshell", `if true; then (printf '<%s>\n' ${item.v}); fi`, same},
		{"process substitution", `cat <(printf '<%s>\n' ${item.v})`, same},
		{"escaped quote before", `printf '%s<%s>\n' \" ${item.v}`, func(v string) string { return v }},
		// A scan of bash's quoting rules took a case pattern's ")" inside
		// $( ) for the end of the substitution, and a $( ) in a
		// here-document for text; the syntax tree reads both as bash does.
		{"case pattern inside quoted command substitution", `printf '<%s>\n' "$(case x in x) printf '%s' ${item.v};; esac)"`, same},
		{"case pattern inside command substitution then word count", `printf '<%s>\n' "$(case x in x) set -- ${item.v}; printf '%s' "$1";; esac)"`, same},
		{"command substitution in a heredoc", "cat <<EOF\n<$(printf '%s' ${item.v})>\nEOF", same},
		{"single quotes in a quoted bash default", `printf '<%s>\n' "${UNSET_PRODIGY_TEST:-'${item.v}'}"`, around("'", "'")},
		{"single quotes in an unquoted bash default", `printf '<%s>\n' ${UNSET_PRODIGY_TEST:-'${item.v}'}`, same},
		{"for loop body", `for ((i=0; i<1; i++)); do printf '<%s>\n' ${item.v}; done`, same},
		{"comment after, with a quote", `printf '<%s>\n' ${item.v} # ${item.v} ' "`, same},
		{"case in a subshell", `(case x in x) printf '<%s>\n' ${item.v};; esac)`, same},
	}
	for _, tmpl := range templates {
		for vname, v := range hostileValues {
			t.Run(tmpl.name+"/"+vname, func(t *testing.T) {
				t.Parallel()
				dir := t.TempDir()
				vars := Vars{"item": map[string]any{"v": v}}
				script, env, err := InterpolateShell(tmpl.script, vars, ShellOptions{})
				if err != nil {
					t.Fatalf("InterpolateShell: %v", err)
				}
				stdout, stderr, err := runBash(t, dir, script, env)
				if err != nil {
					t.Fatalf("bash failed: %v\nscript: %s\nstderr: %s", err, script, stderr)
				}
				want := "<" + tmpl.want(v) + ">\n"
				if tmpl.name == "escaped quote before" {
					want = "\"<" + v + ">\n"
				}
				if tmpl.name == "heredoc then more script" {
					want = "<" + v + ">\ndone\n"
					if strings.Contains(v, "\n") { // sed prefixes every line
						want = "<" + strings.ReplaceAll(v, "\n", "\n<") + ">\ndone\n"
					}
				}
				if stdout != want {
					t.Errorf("output mismatch\nscript: %s\n got %q\nwant %q", script, stdout, want)
				}
				if _, err := os.Stat(filepath.Join(dir, "pwned")); err == nil {
					t.Fatalf("item data was executed: pwned exists (script %s)", script)
				}
			})
		}
	}
}

func same(v string) string { return v }

func around(pre, post string) func(string) string {
	return func(v string) string { return pre + v + post }
}

func TestInterpolateShellReferences(t *testing.T) {
	t.Parallel()
	vars := Vars{"item": json.RawMessage(`{"a":{"b":"x"},"n":41}`), "item_id": "item_7", "shell.output": "out"}
	tests := []struct {
		name, in, want string
		wantEnv        []string
	}{
		{"unquoted", `echo ${item.a.b}`, `echo "${__PRODIGY_V_0}"`, []string{"__PRODIGY_V_0=x"}},
		{"double", `echo "${item.a.b}"`, `echo "${__PRODIGY_V_0}"`, []string{"__PRODIGY_V_0=x"}},
		{"double with text", `echo "a ${item_id} b"`, `echo "a ${__PRODIGY_V_0} b"`, []string{"__PRODIGY_V_0=item_7"}},
		{"single", `echo 'a ${item_id} b'`, `echo 'a '"${__PRODIGY_V_0}"' b'`, nil},
		{"ansi-c", `echo $'a\'${item_id}'`, `echo $'a\''"${__PRODIGY_V_0}"$''`, nil},
		{"reused name", `echo ${item_id} "${item_id}"`, `echo "${__PRODIGY_V_0}" "${__PRODIGY_V_0}"`, nil},
		{"two names", `echo ${item_id} ${shell.output}`, `echo "${__PRODIGY_V_0}" "${__PRODIGY_V_1}"`,
			[]string{"__PRODIGY_V_0=item_7", "__PRODIGY_V_1=out"}},
		{"arithmetic inserts integer", `echo $(( ${item.n} + 1 ))`, `echo $(( 41 + 1 ))`, []string{}},
		{"arith command", `(( ${item.n} > 1 )) && echo big`, `(( 41 > 1 )) && echo big`, []string{}},
		{"bash variables untouched", `echo ${HOME} ${#x} ${x//a/b} ${arr[0]} $item_id`, `echo ${HOME} ${#x} ${x//a/b} ${arr[0]} $item_id`, []string{}},
		{"escape gives bash the brace", `item=1; echo "$${item}"`, `item=1; echo "${item}"`, []string{}},
		{"backslash escaped stays literal", `echo "\${item_id}" \${item_id}`, `echo "\${item_id}" \${item_id}`, []string{}},
		{"comment left as written", "# it's ${item_id}\necho ${item_id}", "# it's ${item_id}\necho \"${__PRODIGY_V_0}\"", nil},
		{"quoted heredoc other vars kept", "cat <<'EOF'\n${HOME} $${x}\nEOF", "cat <<'EOF'\n${HOME} ${x}\nEOF", []string{}},
		{"unquoted heredoc", "cat <<EOF\n'${item_id}'\nEOF\necho ${item_id}", "cat <<EOF\n'${__PRODIGY_V_0}'\nEOF\necho \"${__PRODIGY_V_0}\"", nil},
		{"default", `echo ${item.zzz:-none}`, `echo "${__PRODIGY_V_0}"`, []string{"__PRODIGY_V_0=none"}},
		{"extended glob pattern", `shopt -s extglob; [[ x == @(${item_id}|y) ]]`, `shopt -s extglob; [[ x == @("${__PRODIGY_V_0}"|y) ]]`, nil},
		{"for loop header inserts integer", `for ((i=0; i<${item.n}; i++)); do :; done`, `for ((i=0; i<41; i++)); do :; done`, []string{}},
		{"unknown placeholder in a comment", "echo ok # ${item.nope} $${x}", "echo ok # ${item.nope} $${x}", []string{}},
		{"case inside command substitution", `x="$(case a in a) echo ${item_id};; esac)"`, `x="$(case a in a) echo "${__PRODIGY_V_0}";; esac)"`, nil},
		{"command substitution in an unquoted heredoc", "cat <<EOF\n$(echo ${item_id})\nEOF", "cat <<EOF\n$(echo \"${__PRODIGY_V_0}\")\nEOF", nil},
		{"escaped dollar before a placeholder", `echo \$${item_id}`, `echo \$"${__PRODIGY_V_0}"`, nil},
		{"escaped dollar in ansi-c quotes", `echo $'\${item_id}' $'\\${item_id}'`, `echo $'\${item_id}' $'\\'"${__PRODIGY_V_0}"$''`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, env, err := InterpolateShell(tt.in, vars, ShellOptions{})
			if err != nil {
				t.Fatalf("InterpolateShell(%q): %v", tt.in, err)
			}
			if got != tt.want {
				t.Errorf("script\n got %s\nwant %s", got, tt.want)
			}
			if tt.wantEnv != nil && strings.Join(env, "|") != strings.Join(tt.wantEnv, "|") {
				t.Errorf("env = %q, want %q", env, tt.wantEnv)
			}
		})
	}
}

func TestInterpolateShellErrors(t *testing.T) {
	t.Parallel()
	vars := Vars{"item": map[string]any{"n": "a[$(touch pwned)]", "s": "x\x00y"}, "map.total": 3}
	tests := []struct {
		name, in string
		wantSub  []string
	}{
		{"unknown field", "echo ok\necho ${item.nope}", []string{"line 2", "unknown variable ${item.nope}"}},
		{"unknown reserved root", `echo ${item_total}`, []string{"unknown variable ${item_total}"}},
		{"unknown map key", `echo ${map.failed}`, []string{"unknown variable ${map.failed}"}},
		{"unknown dotted name", `echo ${foo.bar}`, []string{"unknown variable ${foo.bar}"}},
		{"non-integer in arithmetic", `echo $(( ${item.n} + 1 ))`, []string{"arithmetic", "not an integer"}},
		{"non-integer in arith command", `(( ${item.n} ))`, []string{"not an integer"}},
		{"quoted heredoc", "cat <<'EOF'\n${item.n}\nEOF", []string{"quoted here-document", "<<EOF"}},
		{"NUL byte", `echo ${item.s}`, []string{"NUL"}},
		{"non-integer in a for loop header", `for ((i=0; i<${item.n}; i++)); do :; done`, []string{"not an integer"}},
		{"placeholder in a script bash cannot parse", "if echo ${item.n}; fi", []string{"cannot be parsed as bash"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, _, err := InterpolateShell(tt.in, vars, ShellOptions{})
			if err == nil {
				t.Fatalf("InterpolateShell(%q) succeeded", tt.in)
			}
			for _, s := range tt.wantSub {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not contain %q", err, s)
				}
			}
		})
	}
}

func TestInterpolateShellArithmeticRuns(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	script, env, err := InterpolateShell(`echo $(( ${item.n} * 2 )); (( ${item.n} > 1 )) && echo big`, Vars{"item": map[string]any{"n": 21}}, ShellOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out, stderr, err := runBash(t, dir, script, env)
	if err != nil || out != "42\nbig\n" {
		t.Fatalf("got %q, %v (stderr %s)", out, err, stderr)
	}
}

// TestCasePatternsKeepLaterChecks: after case patterns inside $( ) (which
// a scan of bash's quoting rules misread), the contexts where bash
// evaluates a value still find theirs: a non-integer in $(( )) is
// refused, an integer runs, and the values are one word each.
func TestCasePatternsKeepLaterChecks(t *testing.T) {
	t.Parallel()
	script := `x="$(case a in a) printf '%s' ${item.v};; esac)"; y="$(case b in b) printf '%s' ${item.v};; esac)"; echo "$x|$y|$(( ${item.n} + 1 ))"`
	if _, _, err := InterpolateShell(script, Vars{"item": map[string]any{"v": "a  b", "n": "1+1; touch pwned"}}, ShellOptions{}); err == nil || !strings.Contains(err.Error(), "not an integer") {
		t.Fatalf("a non-integer in $(( )) after quoted-back references: %v", err)
	}
	out, env, err := InterpolateShell(script, Vars{"item": map[string]any{"v": "a  *", "n": 41}}, ShellOptions{})
	if err != nil {
		t.Fatal(err)
	}
	stdout, stderr, err := runBash(t, t.TempDir(), out, env)
	if err != nil || stdout != "a  *|a  *|42\n" {
		t.Fatalf("bash: %q %q %v\nscript: %s", stdout, stderr, err, out)
	}
}
