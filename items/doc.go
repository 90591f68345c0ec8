// Package items turns a workflow's map input into the ordered list of work
// items an agent pool processes.
//
// The pipeline is fixed and mirrors Prodigy's data pipeline with every
// stage honoured: load the input (a JSON file or the output of a shell
// command) → select with an RFC 9535 JSONPath → filter with an expr-lang
// expression → sort → keep the first item per distinct value → skip offset →
// limit. Items are then numbered 0..n-1 and named "item_<index>".
//
// Numbers are decoded as [encoding/json.Number] so item data keeps every
// digit; the filter and sort stages see them as float64.
package items
