package main

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
)

// gitProfile counts the git processes of one run from its GIT_TRACE2_EVENT
// trace.
type gitProfile struct {
	Kind        string `json:"kind"`
	N           int    `json:"n"`
	MaxParallel int    `json:"max_parallel"`
	// WallMS is the traced run's wall time (tracing slows it down).
	WallMS float64 `json:"wall_ms"`
	// ProcessesPerItem counts every git process, including those git itself
	// spawns (e.g. `worktree add` runs `branch`, `symbolic-ref` and `reset`).
	ProcessesPerItem float64 `json:"git_processes_per_item"`
	// TopLevelPerItem counts the git processes started by the engine, the
	// script or the agent's shell step.
	TopLevelPerItem float64 `json:"top_level_git_processes_per_item"`
	// GitMSPerItem is the summed lifetime of top-level git processes per item
	// (children are inside their parent's lifetime).
	GitMSPerItem float64 `json:"git_ms_per_item"`
	// Commands breaks the processes down by trace2 command hierarchy
	// ("merge", "worktree/reset", …), most expensive first.
	Commands []gitCommand `json:"commands"`
}

// gitCommand is one git command hierarchy in a gitProfile.
type gitCommand struct {
	Hierarchy        string  `json:"hierarchy"`
	ProcessesPerItem float64 `json:"processes_per_item"`
	MSPerItem        float64 `json:"ms_per_item"`
}

// traceEnv is the environment that makes git write trace2 events to path.
func traceEnv(path string) []string {
	return []string{"GIT_TRACE2_EVENT=" + path, "GIT_TRACE2_EVENT_BRIEF=true", "GIT_TRACE2_EVENT_NESTING=1"}
}

// traceEvent is the part of a trace2 event the benchmark reads.
type traceEvent struct {
	Event     string   `json:"event"`
	SID       string   `json:"sid"`
	Hierarchy string   `json:"hierarchy"`
	Argv      []string `json:"argv"`
	TAbs      float64  `json:"t_abs"`
}

// eachTraceEvent calls fn for every event of the trace2 event file at path,
// in order, until fn returns false. Lines that do not parse (two processes'
// writes interleaved) are skipped.
func eachTraceEvent(path string, fn func(traceEvent) bool) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("failed to open trace: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 1<<16), 1<<24)
	for sc.Scan() {
		var ev traceEvent
		if json.Unmarshal(sc.Bytes(), &ev) != nil {
			continue
		}
		if !fn(ev) {
			return nil
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("failed to read trace: %w", err)
	}
	return nil
}

// readProfile aggregates the trace2 event file at path for a run of n items.
func readProfile(path string, m measurement) (gitProfile, error) {
	p := gitProfile{Kind: m.Kind, N: m.N, MaxParallel: m.MaxParallel, WallMS: m.WallMS}
	type proc struct {
		hierarchy string
		seconds   float64
	}
	procs := map[string]*proc{}
	get := func(sid string) *proc {
		if procs[sid] == nil {
			procs[sid] = &proc{hierarchy: "(unknown)"}
		}
		return procs[sid]
	}
	err := eachTraceEvent(path, func(ev traceEvent) bool {
		switch ev.Event {
		case "start":
			get(ev.SID)
		case "cmd_name":
			get(ev.SID).hierarchy = ev.Hierarchy
		case "atexit":
			get(ev.SID).seconds = ev.TAbs
		}
		return true
	})
	if err != nil {
		return p, err
	}
	n := float64(m.N)
	by := map[string]*gitCommand{}
	var top, gitSeconds float64
	for sid, pr := range procs {
		c := by[pr.hierarchy]
		if c == nil {
			c = &gitCommand{Hierarchy: pr.hierarchy}
			by[pr.hierarchy] = c
		}
		c.ProcessesPerItem++
		c.MSPerItem += pr.seconds * 1000
		if !strings.Contains(sid, "/") {
			top++
			gitSeconds += pr.seconds
		}
	}
	for _, c := range by {
		c.ProcessesPerItem = round2(c.ProcessesPerItem / n)
		c.MSPerItem = round2(c.MSPerItem / n)
		p.Commands = append(p.Commands, *c)
	}
	slices.SortFunc(p.Commands, func(a, b gitCommand) int {
		return cmp.Or(cmp.Compare(b.MSPerItem, a.MSPerItem), cmp.Compare(a.Hierarchy, b.Hierarchy))
	})
	p.ProcessesPerItem = round2(float64(len(procs)) / n)
	p.TopLevelPerItem = round2(top / n)
	p.GitMSPerItem = round2(gitSeconds * 1000 / n)
	return p, nil
}
