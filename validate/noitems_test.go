package validate

import (
	"testing"

	"github.com/prodigy-action/prodigy-action/config"
)

func TestNoItemsNamesTheStagesThatDropItems(t *testing.T) {
	m := config.MapPhase{Input: "items.json"}
	if got := NoItems(m); got != `map.input "items.json" selected 0 items` {
		t.Fatalf("plain: %s", got)
	}
	m.JSONPath, m.Filter, m.Offset = "$.items[*]", "item.ok == true", 3
	if got := NoItems(m); got != `map.input "items.json" selected 0 items (after json_path "$.items[*]", filter "item.ok == true", offset 3)` {
		t.Fatalf("with stages: %s", got)
	}
}
