package archtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// dag is the import graph enforced today: each node (a package path
// relative to the module, covering its subpackages) with the nodes it may
// import. It is ../shared/DESIGN.md's target graph but for the departures
// listed in design_test.go (checked by TestDAGDepartsFromDesignOnlyAsSaid).
// Nodes that do not exist yet are fine.
var dag = map[string][]string{
	// cmd/action is main only; its command tree is cli (cli/cli's cmd/gh +
	// pkg/cmd split), which has the CLI layer's imports.
	"cmd/action": {"cli"},
	"cli":        {"actionapp", "runner", "shard", "jobstore", "gitops", "dlq", "report", "config", "telemetry", "validate"},
	"actionapp":  {"runner", "shard", "dlq", "report", "ghaction", "gitops", "config", "telemetry", "validate"},
	// shard is plan → shard → gather on the engine's public API (runner.Job).
	"shard":  {"runner", "jobstore", "dlq", "gitops", "config", "validate"},
	"runner": {"config", "items", "retry", "gitops", "dlq", "interp", "jobstore", "spend", "claudecode", "validate"},
	// validate is the static analysis of a workflow before anything runs;
	// the engine calls the rules it stands on.
	"validate": {"config", "items", "interp", "retry", "claudecode"},
	// claudecode is how Claude Code is invoked and its transcript read;
	// the engine runs what it builds.
	"claudecode": {"config", "spend", "dlq"},
	// telemetry implements runner.Tracer with the OpenTelemetry SDK, so the
	// engine never imports otel; only the CLI and the Action wire it.
	"telemetry": {"runner"},
	"report":    {"runner", "dlq", "validate"},
	"ghaction":  {"retry"},
	"items":     {"config"},
	"interp":    {},
	"jobstore":  {},
	"spend":     {},
	"config":    {},
	"retry":     {},
	"gitops":    {},
	"dlq":       {},
}

// leaves may be imported by any package and import no project package
// but other leaves: internal/* helpers, the redactor, and examples (the
// embedded example workflows: data only, used by the demo).
var leaves = []string{"internal", "redact", "examples"}

// tools are programs outside the DAG (benchmarks with their own plain-git
// baselines): not checked, and nothing may import them.
var tools = []string{"bench"}

// pending are expectations that a known, scheduled change will meet; the
// subtest is skipped (not passed) while the violation lasts.
var pending = map[string]string{}

// gitOwner is the only node allowed to start git.
const gitOwner = "gitops"

type listedPackage struct {
	ImportPath string
	Dir        string
	GoFiles    []string
	CgoFiles   []string
	Imports    []string
	Standard   bool
	Module     *struct{ Path, Dir string }
	Error      *struct{ Err string }
}

// modulePackages runs `go list -deps -json ./...` at the module root and
// returns the module's own packages by path relative to the module.
func modulePackages(t *testing.T) (string, map[string]listedPackage) {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	root := filepath.Dir(strings.TrimSpace(string(out)))
	cmd := exec.Command("go", "list", "-deps", "-json", "./...")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	data, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	var modPath string
	pkgs := map[string]listedPackage{}
	dec := json.NewDecoder(bytes.NewReader(data))
	for {
		var p listedPackage
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decode go list output: %v", err)
		}
		if p.Standard || p.Module == nil || p.Module.Dir != root {
			continue
		}
		if p.Error != nil {
			t.Fatalf("go list %s: %s", p.ImportPath, p.Error.Err)
		}
		modPath = p.Module.Path
		pkgs[p.ImportPath] = p
	}
	if len(pkgs) == 0 {
		t.Fatal("go list found no package of the module")
	}
	rel := map[string]listedPackage{}
	for path, p := range pkgs {
		rel[strings.TrimPrefix(strings.TrimPrefix(path, modPath), "/")] = p
	}
	return modPath, rel
}

// within reports whether pkg is dir or below it.
func within(pkg, dir string) bool { return pkg == dir || strings.HasPrefix(pkg, dir+"/") }

// nodeOf returns the DAG node of a module package ("" when it is none).
func nodeOf(pkg string) string {
	best := ""
	for n := range dag {
		if within(pkg, n) && len(n) > len(best) {
			best = n
		}
	}
	return best
}

func isLeaf(pkg string) bool {
	for _, l := range leaves {
		if within(pkg, l) {
			return true
		}
	}
	return false
}

func isTool(pkg string) bool {
	for _, l := range tools {
		if within(pkg, l) {
			return true
		}
	}
	return false
}

// skipIfPending skips a subtest whose violation is scheduled to go away.
func skipIfPending(t *testing.T, key string, problems []string) {
	t.Helper()
	if len(problems) == 0 {
		if why, ok := pending[key]; ok {
			t.Logf("%s now holds; remove its pending entry (%s)", key, why)
		}
		return
	}
	if why, ok := pending[key]; ok {
		t.Skipf("known violation, %s:\n  %s", why, strings.Join(problems, "\n  "))
	}
	t.Errorf("violations:\n  %s", strings.Join(problems, "\n  "))
}

// TestImportGraphFollowsTheDAG checks every non-test import between the
// module's packages against dag, leaves and tools.
func TestImportGraphFollowsTheDAG(t *testing.T) {
	modPath, pkgs := modulePackages(t)
	byNode := map[string][]string{}
	var stray []string
	for pkg := range pkgs {
		switch n := nodeOf(pkg); {
		case n != "":
			byNode[n] = append(byNode[n], pkg)
		case isLeaf(pkg):
			byNode["(leaves)"] = append(byNode["(leaves)"], pkg)
		case isTool(pkg):
		default:
			stray = append(stray, pkg)
		}
	}
	sort.Strings(stray)
	if len(stray) > 0 {
		t.Errorf("packages outside the DAG of DESIGN.md (add them to it and to this test): %v", stray)
	}
	nodes := append(sortedKeys(dag), "(leaves)")
	for _, node := range nodes {
		t.Run("imports/"+node, func(t *testing.T) {
			members := byNode[node]
			if len(members) == 0 {
				t.Logf("%s has no package yet", node)
				return
			}
			sort.Strings(members)
			var problems []string
			for _, pkg := range members {
				for _, imp := range pkgs[pkg].Imports {
					if !within(imp, modPath) {
						continue
					}
					dep := strings.TrimPrefix(strings.TrimPrefix(imp, modPath), "/")
					if why := forbidden(node, pkg, dep); why != "" {
						problems = append(problems, pkg+" imports "+dep+": "+why)
					}
				}
			}
			skipIfPending(t, "imports/"+node, problems)
		})
	}
}

// forbidden says why pkg (of node) may not import dep, or "".
func forbidden(node, pkg, dep string) string {
	switch {
	case isTool(dep):
		return "tools are programs, not libraries"
	case isLeaf(dep):
		return ""
	case node == "(leaves)":
		return "leaf helpers import no project package but other leaves"
	}
	depNode := nodeOf(dep)
	if depNode == node {
		return "" // its own subpackages
	}
	if depNode == "" {
		return "not a package of the DAG"
	}
	for _, ok := range dag[node] {
		if ok == depNode {
			return ""
		}
	}
	return node + " may import only " + strings.Join(dag[node], ", ")
}

// TestOnlyGitopsStartsGit scans the non-test Go files of every package but
// gitops (and the tools) for exec.Command, exec.CommandContext or
// exec.LookPath whose program is "git" (a string literal, or a constant
// declared as one), a path ending in /git, or exec.Cmd values with such a
// Path.
func TestOnlyGitopsStartsGit(t *testing.T) {
	_, pkgs := modulePackages(t)
	byNode := map[string][]string{}
	for pkg := range pkgs {
		if isTool(pkg) || within(pkg, gitOwner) {
			continue
		}
		key := nodeOf(pkg)
		if key == "" {
			key = pkg
		}
		byNode[key] = append(byNode[key], pkg)
	}
	for _, node := range sortedKeys(byNode) {
		t.Run("git/"+node, func(t *testing.T) {
			var problems []string
			for _, pkg := range byNode[node] {
				p := pkgs[pkg]
				for _, f := range append(append([]string{}, p.GoFiles...), p.CgoFiles...) {
					found, err := gitCalls(filepath.Join(p.Dir, f))
					if err != nil {
						t.Fatal(err)
					}
					problems = append(problems, found...)
				}
			}
			sort.Strings(problems)
			skipIfPending(t, "git/"+node, problems)
		})
	}
}

// gitCalls lists the places in one file that start (or look up) git.
func gitCalls(path string) ([]string, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	execNames := map[string]bool{}
	for _, imp := range f.Imports {
		if p, _ := strconv.Unquote(imp.Path.Value); p == "os/exec" {
			name := "exec"
			if imp.Name != nil {
				name = imp.Name.Name
			}
			execNames[name] = true
		}
	}
	if len(execNames) == 0 {
		return nil, nil
	}
	consts := stringConsts(f)
	isGit := func(e ast.Expr) bool {
		s, ok := stringValue(e, consts)
		return ok && (s == "git" || strings.HasSuffix(s, "/git"))
	}
	var found []string
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.CallExpr:
			sel, ok := n.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			x, ok := sel.X.(*ast.Ident)
			if !ok || !execNames[x.Name] {
				return true
			}
			arg := -1
			switch sel.Sel.Name {
			case "Command", "LookPath":
				arg = 0
			case "CommandContext":
				arg = 1
			}
			if arg >= 0 && len(n.Args) > arg && isGit(n.Args[arg]) {
				found = append(found, fset.Position(n.Pos()).String()+": exec."+sel.Sel.Name+"(git)")
			}
		case *ast.CompositeLit:
			sel, ok := n.Type.(*ast.SelectorExpr)
			if !ok || sel.Sel.Name != "Cmd" {
				return true
			}
			if x, ok := sel.X.(*ast.Ident); !ok || !execNames[x.Name] {
				return true
			}
			for _, el := range n.Elts {
				if kv, ok := el.(*ast.KeyValueExpr); ok {
					if k, ok := kv.Key.(*ast.Ident); ok && k.Name == "Path" && isGit(kv.Value) {
						found = append(found, fset.Position(n.Pos()).String()+": exec.Cmd{Path: git}")
					}
				}
			}
		}
		return true
	})
	return found, nil
}

// stringConsts collects the file's string constants declared by literal.
func stringConsts(f *ast.File) map[string]string {
	out := map[string]string{}
	for _, d := range f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		for _, spec := range gd.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, name := range vs.Names {
				if i < len(vs.Values) {
					if s, ok := stringValue(vs.Values[i], nil); ok {
						out[name.Name] = s
					}
				}
			}
		}
	}
	return out
}

func stringValue(e ast.Expr, consts map[string]string) (string, bool) {
	switch e := e.(type) {
	case *ast.BasicLit:
		if e.Kind == token.STRING {
			s, err := strconv.Unquote(e.Value)
			return s, err == nil
		}
	case *ast.Ident:
		s, ok := consts[e.Name]
		return s, ok
	case *ast.ParenExpr:
		return stringValue(e.X, consts)
	}
	return "", false
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
