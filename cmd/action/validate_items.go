package main

import (
	"errors"
	"fmt"

	"github.com/prodigy-action/prodigy-action/config"
	"github.com/prodigy-action/prodigy-action/items"
)

// The items pipeline options (json_path, filter, sort_by, distinct, …) are
// compiled by items/, not config/: validate and run check them up front.
// A filter problem is reported at its column in the file.
func init() {
	validateExtra = append(validateExtra, func(wf *config.Workflow) []error {
		var errs []error
		filter := wf.Map.Filter
		if _, err := items.CompileFilter(filter); filter != "" && err != nil {
			pos := wf.Map.FilterPos
			var fe *items.FilterError
			if errors.As(err, &fe) && fe.Column > 0 && pos.Line > 0 {
				pos.Col += fe.Column - 1
			}
			errs = append(errs, fmt.Errorf("%s: map.filter: %w", pos, err))
			filter = ""
		}
		if err := items.Check(items.Options{
			Input: wf.Map.Input, JSONPath: wf.Map.JSONPath, Filter: filter, SortBy: wf.Map.SortBy,
			Distinct: wf.Map.Distinct, Offset: wf.Map.Offset, MaxItems: wf.Map.MaxItems,
		}); err != nil {
			errs = append(errs, fmt.Errorf("%s: map: %w", wf.Map.Pos, err))
		}
		return errs
	})
}
