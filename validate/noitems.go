package validate

import (
	"fmt"
	"strings"

	"github.com/prodigy-action/prodigy-action/config"
)

// NoItems says why a map phase that selected no item selected none: its
// input and every stage of the items pipeline that can drop items
// ("map.input "x.json" selected 0 items (after filter "…", offset 2)").
func NoItems(m config.MapPhase) string {
	var sel []string
	for _, kv := range [][2]string{{"json_path", m.JSONPath}, {"filter", m.Filter}, {"distinct", m.Distinct}} {
		if kv[1] != "" {
			sel = append(sel, fmt.Sprintf("%s %q", kv[0], kv[1]))
		}
	}
	if m.Offset > 0 {
		sel = append(sel, fmt.Sprintf("offset %d", m.Offset))
	}
	why := fmt.Sprintf("map.input %q selected 0 items", m.Input)
	if len(sel) > 0 {
		why += " (after " + strings.Join(sel, ", ") + ")"
	}
	return why
}
