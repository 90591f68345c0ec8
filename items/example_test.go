package items_test

import (
	"fmt"

	"github.com/prodigy-action/prodigy-action/items"
)

func ExampleCompileFilter() {
	f, err := items.CompileFilter(`path matches '\.rs$' && has_issues == true`)
	if err != nil {
		panic(err)
	}
	for _, it := range []map[string]any{
		{"path": "src/lib.rs", "has_issues": true},
		{"path": "src/main.go", "has_issues": true},
		{"path": "src/util.rs"}, // missing field: false, not an error
	} {
		ok, err := f.Match(it)
		fmt.Println(it["path"], ok, err)
	}
	// Output:
	// src/lib.rs true <nil>
	// src/main.go false <nil>
	// src/util.rs false <nil>
}
