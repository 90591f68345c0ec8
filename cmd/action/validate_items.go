package main

import (
	"fmt"

	"github.com/prodigy-action/prodigy-action/config"
	"github.com/prodigy-action/prodigy-action/items"
)

// The items pipeline options (json_path, filter, sort_by, distinct, …) are
// compiled by items/, not config/: validate and run check them up front.
func init() {
	validateExtra = append(validateExtra, func(wf *config.Workflow) []error {
		if err := items.Check(items.Options{
			Input: wf.Map.Input, JSONPath: wf.Map.JSONPath, Filter: wf.Map.Filter, SortBy: wf.Map.SortBy,
			Distinct: wf.Map.Distinct, Offset: wf.Map.Offset, MaxItems: wf.Map.MaxItems,
		}); err != nil {
			return []error{fmt.Errorf("%s: map: %w", wf.Map.Pos, err)}
		}
		return nil
	})
}
