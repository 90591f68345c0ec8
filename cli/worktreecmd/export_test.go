package worktreecmd

// CleanOrphans is cleanOrphans, for the external tests.
var CleanOrphans = cleanOrphans
