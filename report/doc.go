// Package report renders a finished job as GitHub-flavoured markdown: the
// job summary ($GITHUB_STEP_SUMMARY, under 1 MiB) and the sticky pull
// request comment (under 65,000 characters). Renderers are pure functions
// of an Input the caller fills from the engine's result and the DLQ, so the
// package has no I/O and no dependency on the engine.
//
// All text that comes from work items or errors goes through Escape or
// Cell: it cannot inject markdown or HTML, ping anyone with @, or reference
// other issues.
package report
