package runner

import (
	"context"

	"github.com/prodigy-action/prodigy-action/config"
	"github.com/prodigy-action/prodigy-action/items"
	"github.com/prodigy-action/prodigy-action/validate"
)

// LoadItems runs wf's input pipeline (map.input, json_path, filter,
// sort_by, distinct, offset, max_items) in dir with env, as the map phase
// does but without running setup, and returns the work items with their
// ids. The Action's redrive uses it to re-read an item by id from the
// current checkout.
func LoadItems(ctx context.Context, wf *config.Workflow, dir string, env []string) ([]items.Item, error) {
	return items.Load(ctx, validate.ItemOptions(wf, dir, env))
}
