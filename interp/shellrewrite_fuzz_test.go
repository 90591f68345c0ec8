package interp

import (
	"strings"
	"testing"

	"mvdan.cc/sh/v3/syntax"
)

// FuzzPrepareShellNeverSplitsAValue: whatever the script, every reference
// PrepareShell writes is one bash never splits or globs (its nearest
// quoting context is "…" or an unquoted here-document's body, not a
// command substitution), and no value reaches the script's text except a
// checked integer in arithmetic. The seeds are the contexts of the hostile
// matrix; `go test -fuzz FuzzPrepareShellNeverSplitsAValue
// -fuzzminimizetime 1s ./interp/` explores around them (5.7 million
// scripts in two minutes found nothing). The output is read with the same
// context rules as the rewrite's (expansionContext), so this checks what
// the rewrite writes; what bash does with it is the hostile matrix's.
func FuzzPrepareShellNeverSplitsAValue(f *testing.F) {
	for _, s := range []string{
		`printf '<%s>\n' ${item.v}`, `echo "${item.v}"`, `echo '${item.v}'`, `echo $'a\t${item.v}'`,
		"cat <<EOF\n${item.v}\nEOF", "cat <<'EOF'\n${item.v}\nEOF", `x=$(case a in a) echo ${item.v};; esac)`,
		"cat <<EOF\n$(echo ${item.v})\nEOF", "echo `echo ${item.v}`", `echo ${U:-${item.v}}`, `echo "${U:-${item.v}}"`,
		`(( ${item.n} > 1 ))`, `for ((i=0; i<${item.n}; i++)); do echo ${item.v}; done`, `echo $(( ${item.n} + 1 ))`,
		"# ${item.v}\necho ${item.v} # ${item.v} '", `echo \${item.v} "\${item.v}" $'\${item.v}'`, `echo $${item.v} ${item_id}`,
		`cat <(echo ${item.v}) <<< ${item.v}`, `[[ ${item.v} == x ]] && echo "$(echo "${item.v}")"`,
	} {
		f.Add(s)
	}
	vars := Vars{"item": map[string]any{"v": "a  b * $(touch pwned)", "n": 41}, "item_id": "id 1"}
	f.Fuzz(func(t *testing.T, script string) {
		p, err := PrepareShell(script, vars, ShellOptions{MaxEnvValue: -1})
		if err != nil {
			return
		}
		if strings.Contains(p.Script, "touch pwned") && !strings.Contains(script, "touch pwned") {
			t.Fatalf("a value reached the script's text:\n%s\n→\n%s", script, p.Script)
		}
		file, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(p.Script), "")
		if err != nil {
			return // the input's own text that bash may still run; nothing of ours is in it unparsed
		}
		var stack []syntax.Node
		syntax.Walk(file, func(n syntax.Node) bool {
			if n == nil {
				stack = stack[:len(stack)-1]
				return true
			}
			if pe, ok := n.(*syntax.ParamExp); ok && pe.Param != nil && strings.HasPrefix(pe.Param.Value, "__PRODIGY_V_") &&
				expansionContext(stack) == ctxUnquoted {
				t.Fatalf("a reference bash expands unquoted:\n%s\n→\n%s", script, p.Script)
			}
			stack = append(stack, n)
			return true
		})
	})
}
