package items

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/builtin"
	"github.com/expr-lang/expr/conf"
	"github.com/expr-lang/expr/file"
	"github.com/expr-lang/expr/vm"
)

// Filter is a compiled filter expression (expr-lang syntax with Prodigy's
// spellings accepted, see [CompileFilter]). It is safe for concurrent use.
type Filter struct {
	src     string
	program *vm.Program
	regexps sync.Map // pattern string → *regexp.Regexp, for matches(s, re)
}

// CompileFilter compiles src once; run it per item with [Filter.Match].
//
// The language is expr-lang (https://expr-lang.org) with these additions so
// Prodigy filters work unchanged:
//   - 'single quoted' strings are raw (only \' and \\ are escapes), so
//     `path matches '\.rs$'` is the regular expression \.rs$;
//   - AND/OR/NOT, null, and a single = for equality;
//   - infix starts_with/ends_with, and the functions contains(), matches(),
//     starts_with(), ends_with(), length(), is_null(), is_not_null(),
//     is_number(), is_string(), is_bool(), is_array(), is_object();
//   - `list contains x` tests membership as well as substrings.
//
// Missing fields are nil and never an error: comparisons (<, >, <=, >=)
// involving nil or values of different kinds are false, member access on a
// missing value is nil (every `.` acts as `?.`), and `contains`/`matches`
// on nil are false. The error names the expression and says why it does not
// compile, with the column in src.
//
// `!missing` is true. Arithmetic on a missing field and out-of-range
// indexes are still errors.
func CompileFilter(src string) (*Filter, error) {
	if strings.TrimSpace(src) == "" {
		return nil, fmt.Errorf("invalid filter %q: the expression is empty", src)
	}
	f := &Filter{src: src}
	rewritten, pos := rewriteFilter(src)
	patch := &nilSafe{pos: pos}
	opts := []expr.Option{
		expr.AllowUndefinedVariables(),
		expr.Patch(patch),
		expr.Function("__lt", cmpFunc(func(c int) bool { return c < 0 })),
		expr.Function("__le", cmpFunc(func(c int) bool { return c <= 0 })),
		expr.Function("__gt", cmpFunc(func(c int) bool { return c > 0 })),
		expr.Function("__ge", cmpFunc(func(c int) bool { return c >= 0 })),
		expr.Function("__contains", args2(containsValue)),
		expr.Function("__not", args1(notValue)),
		expr.Function("__matches", args2(f.matches)),
		expr.Function("starts_with", args2(func(a, b any) (any, error) {
			s, ok1 := a.(string)
			p, ok2 := b.(string)
			return ok1 && ok2 && strings.HasPrefix(s, p), nil
		})),
		expr.Function("ends_with", args2(func(a, b any) (any, error) {
			s, ok1 := a.(string)
			p, ok2 := b.(string)
			return ok1 && ok2 && strings.HasSuffix(s, p), nil
		})),
		expr.Function("length", args1(lengthOf)),
		expr.Function("is_null", args1(func(v any) (any, error) { return v == nil, nil })),
		expr.Function("is_not_null", args1(func(v any) (any, error) { return v != nil, nil })),
		expr.Function("is_number", args1(func(v any) (any, error) { _, ok := toFloat(v); return ok, nil })),
		expr.Function("is_string", args1(func(v any) (any, error) { _, ok := v.(string); return ok, nil })),
		expr.Function("is_bool", args1(func(v any) (any, error) { _, ok := v.(bool); return ok, nil })),
		expr.Function("is_array", args1(func(v any) (any, error) { _, ok := v.([]any); return ok, nil })),
		expr.Function("is_object", args1(func(v any) (any, error) { _, ok := v.(map[string]any); return ok, nil })),
	}
	patch.known = knownFunctions(opts)
	program, err := expr.Compile(rewritten, opts...)
	if patch.err != nil {
		return nil, &FilterError{Filter: src, Column: patch.errCol, Err: patch.err}
	}
	if err != nil {
		msg, col := describeExprError(err, pos)
		return nil, &FilterError{Filter: src, Column: col, Err: errors.New(msg)}
	}
	f.program = program
	return f, nil
}

// String returns the filter's source text.
func (f *Filter) String() string { return f.src }

// Match evaluates the filter against env, whose keys are the expression's
// variables. json.Number values anywhere in env are compared as float64.
// A nil result (e.g. a bare missing field) is false; any other non-bool
// result is an error naming the filter and the type it produced.
func (f *Filter) Match(env map[string]any) (bool, error) {
	norm := make(map[string]any, len(env))
	for k, v := range env {
		norm[k] = numbersToFloat(v)
	}
	out, err := expr.Run(f.program, norm)
	if err != nil {
		return false, fmt.Errorf("filter %q: %w", f.src, err)
	}
	switch v := out.(type) {
	case bool:
		return v, nil
	case nil:
		return false, nil
	default:
		return false, fmt.Errorf("filter %q evaluated to %s %v, not a bool (write a comparison such as `x == 1`)",
			f.src, kindName(v), v)
	}
}

// describeExprError turns an expr compile error into one line whose column
// refers to the user's source (pos maps rewritten runes to source runes).
func describeExprError(err error, pos []int) (string, int) {
	var fe *file.Error
	if !errors.As(err, &fe) {
		return err.Error(), 0
	}
	at := fe.From
	if at >= 0 && at < len(pos) {
		at = pos[at]
	}
	return fe.Message, at + 1
}

// FilterError is a filter that does not compile; Column (1-based, in
// bytes of Filter; 0 when unknown) is where the problem is.
type FilterError struct {
	Filter string
	Column int
	Err    error
}

func (e *FilterError) Error() string {
	if e.Column > 0 {
		return fmt.Sprintf("invalid filter %q: %v (at column %d)", e.Filter, e.Err, e.Column)
	}
	return fmt.Sprintf("invalid filter %q: %v", e.Filter, e.Err)
}

func (e *FilterError) Unwrap() error { return e.Err }

// nilSafe rewrites the AST so missing values never raise errors: ordering
// comparisons, `contains` and `matches` become calls to helpers that are
// false for nil or mismatched kinds, and !nil is true. (Member access is made optional by
// rewriteFilter.) Constant regular expressions are checked here, so a bad
// pattern is a compile error; err keeps the first one.
type nilSafe struct {
	err    error
	errCol int
	pos    []int           // rewritten offset → source offset
	known  map[string]bool // functions a filter may call
}

// knownFunctions names the functions a filter may call: ours (opts) and
// expr's builtins. A call of anything else is a compile error, not a
// failure of every item at run time.
func knownFunctions(opts []expr.Option) map[string]bool {
	known := map[string]bool{}
	for _, f := range builtin.Builtins {
		known[f.Name] = true
	}
	conf := conf.CreateNew()
	for _, o := range opts {
		o(conf)
	}
	for name := range conf.Functions {
		known[name] = true
	}
	return known
}

// userFunctions lists the documented filter functions for messages.
const userFunctions = "contains, matches, starts_with, ends_with, length, is_null, is_not_null, is_number, is_string, is_bool, is_array, is_object (and expr-lang's builtins such as len, lower, upper, trim)"

var cmpHelpers = map[string]string{
	"<": "__lt", "<=": "__le", ">": "__gt", ">=": "__ge", "contains": "__contains", "matches": "__matches",
}

// Visit implements ast.Visitor.
func (v *nilSafe) Visit(node *ast.Node) {
	if n, ok := (*node).(*ast.UnaryNode); ok && (n.Operator == "!" || n.Operator == "not") {
		ast.Patch(node, &ast.CallNode{Callee: &ast.IdentifierNode{Value: "__not"}, Arguments: []ast.Node{n.Node}})
		return
	}
	if n, ok := (*node).(*ast.CallNode); ok && v.err == nil {
		if id, ok := n.Callee.(*ast.IdentifierNode); ok && !v.known[id.Value] {
			at := n.Location().From
			if at >= 0 && at < len(v.pos) {
				at = v.pos[at]
			}
			v.err = fmt.Errorf("unknown function %s(); filters can call %s", id.Value, userFunctions)
			v.errCol = at + 1
		}
	}
	if n, ok := (*node).(*ast.BinaryNode); ok {
		if fn, ok := cmpHelpers[n.Operator]; ok {
			if s, ok := n.Right.(*ast.StringNode); ok && fn == "__matches" && v.err == nil {
				if _, err := regexp.Compile(s.Value); err != nil {
					v.err = fmt.Errorf("invalid regular expression %q: %w", s.Value, err)
				}
			}
			ast.Patch(node, &ast.CallNode{
				Callee:    &ast.IdentifierNode{Value: fn},
				Arguments: []ast.Node{n.Left, n.Right},
			})
		}
	}
}

func args1(fn func(any) (any, error)) func(...any) (any, error) {
	return func(p ...any) (any, error) {
		if len(p) != 1 {
			return nil, fmt.Errorf("expected 1 argument, got %d", len(p))
		}
		return fn(p[0])
	}
}

func args2(fn func(any, any) (any, error)) func(...any) (any, error) {
	return func(p ...any) (any, error) {
		if len(p) != 2 {
			return nil, fmt.Errorf("expected 2 arguments, got %d", len(p))
		}
		return fn(p[0], p[1])
	}
}

// cmpFunc returns a comparison helper: false when either side is nil or the
// two values are not of a comparable kind.
func cmpFunc(ok func(int) bool) func(...any) (any, error) {
	return args2(func(a, b any) (any, error) {
		c, comparable := compareValues(a, b)
		return comparable && ok(c), nil
	})
}

// compareValues orders two numbers, strings, times or durations.
func compareValues(a, b any) (int, bool) {
	if fa, ok := toFloat(a); ok {
		if fb, ok := toFloat(b); ok {
			return cmp3(fa, fb), true
		}
		return 0, false
	}
	switch x := a.(type) {
	case string:
		if y, ok := b.(string); ok {
			return strings.Compare(x, y), true
		}
	case time.Time:
		if y, ok := b.(time.Time); ok {
			return x.Compare(y), true
		}
	}
	return 0, false
}

func cmp3[T int | float64](a, b T) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// toFloat converts any Go number (and json.Number) to float64. Durations
// count as numbers of nanoseconds so they order among themselves.
func toFloat(v any) (float64, bool) {
	if n, ok := v.(json.Number); ok {
		f, err := n.Float64()
		return f, err == nil
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return float64(rv.Int()), true
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return float64(rv.Uint()), true
	case reflect.Float32, reflect.Float64:
		return rv.Float(), true
	}
	return 0, false
}

// notValue implements !x and not x: a missing (nil) value is falsy.
func notValue(v any) (any, error) {
	switch x := v.(type) {
	case nil:
		return true, nil
	case bool:
		return !x, nil
	}
	return nil, fmt.Errorf("cannot negate %s: ! needs a boolean", kindName(v))
}

// containsValue implements `a contains b`: substring for strings, element
// membership for arrays, key membership for objects, false for nil.
func containsValue(a, b any) (any, error) {
	switch x := a.(type) {
	case nil:
		return false, nil
	case string:
		s, ok := b.(string)
		return ok && strings.Contains(x, s), nil
	case []any:
		for _, e := range x {
			if equalValues(e, b) {
				return true, nil
			}
		}
		return false, nil
	case map[string]any:
		s, ok := b.(string)
		if !ok {
			return false, nil
		}
		_, has := x[s]
		return has, nil
	}
	return false, fmt.Errorf("contains: cannot search in %s", kindName(a))
}

func equalValues(a, b any) bool {
	if fa, ok := toFloat(a); ok {
		fb, ok := toFloat(b)
		return ok && fa == fb
	}
	return reflect.DeepEqual(a, b)
}

// matches implements the function form matches(s, re); the regexp is
// compiled once per pattern and cached on the filter.
func (f *Filter) matches(s, pattern any) (any, error) {
	str, ok := s.(string)
	if !ok {
		return false, nil
	}
	p, ok := pattern.(string)
	if !ok {
		return false, fmt.Errorf("matches: pattern is %s, not a string", kindName(pattern))
	}
	if re, ok := f.regexps.Load(p); ok {
		return re.(*regexp.Regexp).MatchString(str), nil
	}
	re, err := regexp.Compile(p)
	if err != nil {
		return false, fmt.Errorf("matches: invalid regular expression %q: %w", p, err)
	}
	f.regexps.Store(p, re)
	return re.MatchString(str), nil
}

func lengthOf(v any) (any, error) {
	switch x := v.(type) {
	case nil:
		return 0, nil
	case string:
		return len([]rune(x)), nil
	case []any:
		return len(x), nil
	case map[string]any:
		return len(x), nil
	}
	return nil, fmt.Errorf("length: %s has no length", kindName(v))
}

// kindName names the JSON kind of a decoded value for error messages.
func kindName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	if _, ok := toFloat(v); ok {
		return "a number"
	}
	return fmt.Sprintf("a %T", v)
}
