// Package examples embeds the demo workflow that `prodigy-action demo` runs.
package examples

import "embed"

// Demo holds demo/workflow.yml and demo/items.json.
//
//go:embed demo/workflow.yml demo/items.json
var Demo embed.FS
