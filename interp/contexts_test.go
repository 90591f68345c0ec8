package interp

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// evalPayloads are values that run `touch pwned` in the script's directory
// if bash ever evaluates them as arithmetic, a variable name or code.
var evalPayloads = map[string]string{
	"subscript command":  "a[$(touch pwned)]",
	"subscript backtick": "a[`touch pwned`]",
	"plain command":      "$(touch pwned)",
	"code":               "touch pwned",
	"quoted code":        "'; touch pwned; '",
	"newline code":       "1\ntouch pwned",
}

// evaluatingTemplates put ${item.v} where bash evaluates a value. refused
// is true when validation (CheckShell) already refuses the template;
// otherwise InterpolateShell accepts integers only.
var evaluatingTemplates = []struct {
	name, script string
	refused      bool
}{
	{"[[ -eq ]]", `[[ ${item.v} -eq 1 ]]; echo done`, false},
	{"[[ -gt ]] quoted", `[[ "${item.v}" -gt 5 ]]; echo done`, false},
	{"[[ -ne -lt -le -ge ]]", `[[ 1 -ne ${item.v} || 1 -lt ${item.v} || 1 -le ${item.v} || 1 -ge ${item.v} ]]; echo x`, false},
	{"(( ))", `(( ${item.v} > 1 )) && echo yes`, false},
	{"$(( ))", `echo $(( ${item.v} + 1 ))`, false},
	{"$(( )) via cmdsub", `echo $(( $(printf '%s' "${item.v}") + 1 ))`, false},
	{"$[ ]", `echo $[ ${item.v} + 1 ]`, false},
	{"let", `let "n = ${item.v}"; echo $n`, false},
	{"let unquoted", `let n=${item.v}; echo $n`, false},
	{"declare -i", `declare -i n="${item.v}"; echo $n`, false},
	{"local -i", `f() { local -i n=${item.v}; echo $n; }; f`, false},
	{"typeset -i", `typeset -i n; n="${item.v}"; echo $n`, false},
	{"integer var later", `declare -i n; n+=${item.v}; echo $n`, false},
	{"array subscript read", `a=(x y); echo "${a[${item.v}]}"`, false},
	{"array subscript write", `a[${item.v}]=1; echo ok`, false},
	{"array literal subscript", `a=([${item.v}]=1); echo ok`, false},
	{"substring offset", `v=abcdef; echo "${v:${item.v}}"`, false},
	{"substring length", `v=abcdef; echo "${v:1:${item.v}}"`, false},
	{"for (( ))", `for (( i=0; i < ${item.v}; i++ )); do :; done; echo ok`, false},
	{"printf -v", `printf -v "${item.v}" '%s' x`, true},
	{"read name", `read -r "${item.v}" <<< x`, true},
	{"unset", `unset "${item.v}"`, true},
	{"declare name", `declare "${item.v}"=1`, true},
	{"declare -n", `declare -n r="${item.v}"; echo "$r"`, true},
	{"[[ -v ]]", `[[ -v ${item.v} ]] && echo set`, true},
	{"test -v", `test -v "${item.v}" && echo set`, true},
	{"[ -v ]", `[ -v "${item.v}" ] && echo set`, true},
	{"bash -c", `bash -c "echo ${item.v}"`, true},
	{"bash -c single quoted", `bash -c 'echo ${item.v}'`, true},
	{"sh -ec", `sh -ec "${item.v}"`, true},
	{"bash -o pipefail -c", `bash -o pipefail -c "echo ${item.v}"`, true},
	{"zsh -c", `zsh -c "echo ${item.v}"`, true},
	{"dash -c", `dash -c "echo ${item.v}"`, true},
	{"ksh -c", `ksh -c "echo ${item.v}"`, true},
	{"/bin/sh -c", `/bin/sh -c "echo ${item.v}"`, true},
	{"eval", `eval "echo ${item.v}"`, true},
	{"eval single quoted", `eval 'echo ${item.v}'`, true},
	{"command eval", `command eval "${item.v}"`, true},
	{"source procsub", `source <(echo "${item.v}")`, true},
	{"trap", `trap "${item.v}" EXIT`, true},
	{"ssh", `ssh host "echo ${item.v}"`, true},
	{"su -c", `su root -c "echo ${item.v}"`, true},
	{"sudo sh -c", `sudo sh -c "echo ${item.v}"`, true},
	{"xargs sh -c", `echo x | xargs sh -c "echo ${item.v}"`, true},
	{"xargs -I sh", `printf '%s\n' "${item.v}" | xargs -I{} sh -c 'echo {}'`, true},
	{"find -exec sh -c", `find . -maxdepth 0 -exec sh -c "echo ${item.v}" \;`, true},
	{"env sh -c", `env A=1 sh -c "echo ${item.v}"`, true},
	{"nohup sh -c", `nohup sh -c "echo ${item.v}"`, true},
	{"timeout sh -c", `timeout 5 sh -c "echo ${item.v}"`, true},
	{"watch", `watch -n1 "echo ${item.v}"`, true},
	{"pipe to bash", `echo "${item.v}" | bash`, true},
	{"pipe to sh -s", `printf '%s\n' "${item.v}" | cat | sh -s`, true},
	{"here-string to bash", `bash <<< "${item.v}"`, true},
	{"heredoc to sh", "sh <<EOF\necho ${item.v}\nEOF", true},
	{"bash script from procsub", `bash <(echo "${item.v}")`, true},
	{"quoted shell name", `"bash" -c "echo ${item.v}"`, true},
	{"escaped shell name", `b\ash -c "echo ${item.v}"`, true},
	{"shell from a variable", `"$BASH" -c "echo ${item.v}"`, true},
	{"shell from command -v", `$(command -v bash) -c "echo ${item.v}"`, true},
	{"exec bash -c", `exec bash -c "echo ${item.v}"`, true},
	{"env bash -c", `/usr/bin/env bash -c "echo ${item.v}"`, true},
	{"cmdsub inside bash -c", `bash -c "echo $(printf '%s' "${item.v}")"`, true},
}

func TestEvaluatingContextsNeverRunPayload(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash not installed")
	}
	scope := Scope{"item", "item_id"}
	for _, tmpl := range evaluatingTemplates {
		t.Run(tmpl.name, func(t *testing.T) {
			t.Parallel()
			probs := CheckShell(tmpl.script, scope, ShellOptions{})
			if tmpl.refused != (len(probs) > 0) {
				t.Fatalf("CheckShell(%q) = %v, want refused=%t", tmpl.script, probs, tmpl.refused)
			}
			if tmpl.refused {
				if probs[0].Line != 1+strings.Count(tmpl.script[:strings.Index(tmpl.script, "${item.v}")], "\n") || probs[0].Col < 1 {
					t.Errorf("problem position %d:%d for %q", probs[0].Line, probs[0].Col, tmpl.script)
				}
			}
			for vname, v := range evalPayloads {
				dir := t.TempDir()
				script, env, err := InterpolateShell(tmpl.script, Vars{"item": map[string]any{"v": v}}, ShellOptions{})
				if err == nil {
					// Accepted: it must still not run the payload.
					_, _, _ = runBash(t, dir, script, env)
					t.Errorf("%s: hostile value accepted (script %q)", vname, script)
				}
				if _, err := os.Stat(filepath.Join(dir, "pwned")); err == nil {
					t.Fatalf("%s: payload ran", vname)
				}
			}
		})
	}
}

// TestEvaluatingContextsAcceptIntegers: the arithmetic templates work with
// integer values, through real bash.
func TestEvaluatingContextsAcceptIntegers(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash not installed")
	}
	for _, tmpl := range evaluatingTemplates {
		if tmpl.refused {
			continue
		}
		t.Run(tmpl.name, func(t *testing.T) {
			t.Parallel()
			script, env, err := InterpolateShell(tmpl.script, Vars{"item": map[string]any{"v": 3}}, ShellOptions{})
			if err != nil {
				t.Fatalf("InterpolateShell: %v", err)
			}
			if _, stderr, err := runBash(t, t.TempDir(), script, env); err != nil {
				t.Fatalf("bash: %v\nscript: %s\nstderr: %s", err, script, stderr)
			}
		})
	}
}

// TestNestedShellOptIn: with allow_nested_shell the value reaches the
// inner shell (which then parses it: only for trusted values).
func TestNestedShellOptIn(t *testing.T) {
	t.Parallel()
	script := `bash -c "echo ${item.v}"`
	if p := CheckShell(script, Scope{"item"}, ShellOptions{AllowNestedShell: true}); len(p) != 0 {
		t.Fatalf("CheckShell with opt-in: %v", p)
	}
	out, env, err := InterpolateShell(script, Vars{"item": map[string]any{"v": "hi"}}, ShellOptions{AllowNestedShell: true})
	if err != nil {
		t.Fatal(err)
	}
	stdout, _, err := runBash(t, t.TempDir(), out, env)
	if err != nil || stdout != "hi\n" {
		t.Fatalf("got %q, %v", stdout, err)
	}
}

// TestSafeNeighbours: data uses next to the refused contexts stay allowed.
func TestSafeNeighbours(t *testing.T) {
	t.Parallel()
	for _, script := range []string{
		`sh -c 'printf "%s\n" "$1"' _ "${item.v}"`,
		`bash script.sh "${item.v}"`,
		`[ "${item.v}" -eq 1 ] 2>/dev/null; echo done`,
		`[[ "${item.v}" == a* ]] && echo yes`,
		`cat <<< "${item.v}"`,
		`declare x="${item.v}"; export Y="${item.v}"; local_var=${item.v}`,
		`printf -v out '%s' "${item.v}"`,
		`read -r line <<< "${item.v}"`,
		`echo "${item.v}" | grep -c x`,
	} {
		if p := CheckShell(script, Scope{"item"}, ShellOptions{}); len(p) != 0 {
			t.Errorf("CheckShell(%q) = %v, want no problem", script, p)
		}
	}
}

// TestHereStringValue: <<< passes the value as data (it used to be taken
// for a heredoc and reach bash unsubstituted).
func TestHereStringValue(t *testing.T) {
	t.Parallel()
	for vname, v := range hostileValues {
		dir := t.TempDir()
		script, env, err := InterpolateShell(`cat <<< "${item.v}"; cat <<<${item.v}`, Vars{"item": map[string]any{"v": v}}, ShellOptions{})
		if err != nil {
			t.Fatalf("%s: %v", vname, err)
		}
		stdout, stderr, err := runBash(t, dir, script, env)
		if err != nil || stdout != v+"\n"+v+"\n" {
			t.Errorf("%s: got %q (%v, %s), want the value twice", vname, stdout, err, stderr)
		}
		if _, err := os.Stat(filepath.Join(dir, "pwned")); err == nil {
			t.Fatalf("%s: payload ran", vname)
		}
	}
}

func TestCheckShellStatic(t *testing.T) {
	t.Parallel()
	scope := Scope{"item", "item_id", "PROJECT"}
	tests := []struct {
		name, script, want string
		line, col          int
	}{
		{"typo root", "echo ok\necho ${itme.name}", `unknown variable ${itme.name}: no variable "itme" here (did you mean item?)`, 2, 6},
		{"map outside reduce", "echo ${map.total}", "only available in reduce", 1, 6},
		{"quoted heredoc", "cat <<'EOF'\n${item.name}\nEOF", "quoted here-document", 2, 1},
		{"nested", "x=1\n  eval \"${item.x}\"", "second shell (eval)", 2, 9},
	}
	for _, tt := range tests {
		p := CheckShell(tt.script, scope, ShellOptions{})
		if len(p) == 0 || !strings.Contains(p[0].Error(), tt.want) || p[0].Line != tt.line || p[0].Col != tt.col {
			t.Errorf("%s: CheckShell = %v, want %q at %d:%d", tt.name, p, tt.want, tt.line, tt.col)
		}
	}
	for _, ok := range []string{"echo ${HOME} ${item.any.path} ${PROJECT} ${item_id} ${nope:-default}", "echo $${item.x}"} {
		if p := CheckShell(ok, scope, ShellOptions{}); len(p) != 0 {
			t.Errorf("CheckShell(%q) = %v", ok, p)
		}
	}
}

func TestCheckText(t *testing.T) {
	t.Parallel()
	p := CheckText("fix ${item.name}\nin ${itme.file} ${map.total} ${x:-d} $${lit}", Scope{"item"})
	if len(p) != 2 || p[0].Line != 2 || p[0].Col != 4 || !strings.Contains(p[1].Error(), "reduce") {
		t.Fatalf("CheckText = %v", p)
	}
}

// TestPrepareShellLargeValues: a 10 MB value reaches bash intact through a
// file (one environment string is limited to 128 KiB).
func TestPrepareShellLargeValues(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("line $(touch pwned) 'q' \"d\"\n", 10<<20/28) + "\n\n"
	vars := Vars{"item": map[string]any{"v": big, "small": "s"}}
	p, err := PrepareShell(`printf '%s' "${item.v}" > out.txt; echo "${item.small}"; echo 'x${item.v}' | wc -c`, vars, ShellOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Files) != 1 || len(p.Env) != 1 {
		t.Fatalf("files %d, env %d; want the big value in a file", len(p.Files), len(p.Env))
	}
	dir := t.TempDir()
	env := append([]string{}, p.Env...)
	for _, f := range p.Files {
		path := filepath.Join(t.TempDir(), f.EnvName)
		if err := os.WriteFile(path, []byte(f.Content), 0o600); err != nil {
			t.Fatal(err)
		}
		env = append(env, f.EnvName+"="+path)
	}
	stdout, stderr, err := runBash(t, dir, p.Script, env)
	if err != nil {
		t.Fatalf("bash: %v\n%s", err, stderr)
	}
	if want := fmt.Sprintf("s\n%d\n", len(big)+2); stdout != want {
		t.Errorf("stdout %q, want %q", stdout, want)
	}
	got, _ := os.ReadFile(filepath.Join(dir, "out.txt"))
	if string(got) != big {
		t.Errorf("value changed in transit: %d bytes, want %d", len(got), len(big))
	}
	if _, err := os.Stat(filepath.Join(dir, "pwned")); err == nil {
		t.Fatal("payload ran")
	}
}

func TestRuntimeErrorNamesLine(t *testing.T) {
	t.Parallel()
	_, _, err := InterpolateShell("echo hi\n[[ ${item.v} -gt 1 ]]", Vars{"item": map[string]any{"v": "a[$(id)]"}}, ShellOptions{})
	var se *ScriptError
	if !errors.As(err, &se) || se.Line != 2 || se.Col != 4 || !strings.Contains(err.Error(), "line 2") || !strings.Contains(err.Error(), "not an integer") {
		t.Fatalf("err = %v", err)
	}
}
