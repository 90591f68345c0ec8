// Package procsup starts, supervises and ends the processes of agents'
// steps, so that no process a step starts outlives its step, nor the
// engine:
//
//   - Each step's process leads its own process group, and its environment
//     carries PRODIGY_PROCESS_TAG=<engine>/<job>/<n>, which everything it
//     starts inherits.
//   - When the step's process exits, its group and every descendant still
//     carrying its tag are killed and reaped. On Linux the runner is a child
//     subreaper (prctl PR_SET_CHILD_SUBREAPER), so descendants that left the
//     group with setsid are reparented to the runner and found among its
//     children (table_linux.go).
//   - When the runner dies (kill -9, OOM), each step's process gets SIGKILL
//     as its parent-death signal, and a watchdog process (a small bash
//     script reading the runner's end of a pipe) kills the groups and the
//     tagged processes the runner left.
//   - resume and dlq retry first end the processes an earlier execution of
//     the job left: the groups in its process record (a Recorder) and every
//     process carrying the job's tag, and wait until they are gone.
//   - Agents may run as users of their own (Users: a uid, a name or a
//     range, one uid per agent running at once; never root or the engine's
//     user), each process started with that credential and no
//     supplementary groups.
//
// Limits: a process that both leaves the group and clears its environment
// (setsid env -i …), or that runs as another user, is not found; its output
// is dropped after the output grace.
//
// It imports no project package: the engine (runner) says what to run,
// which job's record to keep (Recorder) and why a context ended.
package procsup
