package runner

import (
	"fmt"

	"github.com/prodigy-action/prodigy-action/examples"
)

// DemoFiles returns the files of `action demo`'s sample repository
// (workflow.yml, items.json), from the embedded examples.
func DemoFiles() (map[string][]byte, error) {
	files := map[string][]byte{}
	for name, src := range map[string]string{"workflow.yml": "demo/workflow.yml", "items.json": "demo/items.json"} {
		data, err := examples.Demo.ReadFile(src)
		if err != nil {
			return nil, fmt.Errorf("read the embedded demo: %w", err)
		}
		files[name] = data
	}
	return files, nil
}
