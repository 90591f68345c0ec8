// Package interp interpolates workflow placeholders (${item.a.b},
// ${item_id}, ${map.total}, capture variables, workflow env …) into step
// text, and keeps item data from ever being parsed as shell code: each
// placeholder's context is read from the script's syntax tree (bash's
// grammar, mvdan.cc/sh), values travel to bash in environment variables
// referenced from the script, and contexts where bash would evaluate a
// value (arithmetic, subscripts, a second shell's script) take integers
// only or are refused.
//
// The package is pure: it imports no other package of the project and
// takes plain values.
package interp
