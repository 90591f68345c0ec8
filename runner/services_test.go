package runner

import (
	"reflect"
	"testing"
)

// TestServicesHoldNoJob: the job's services get their dependencies when
// they are built, never a pointer back to the job (issue 23): a field of
// type *job, or of a struct type holding one, anywhere inside them fails.
// (The worktree pool, the progress line, the step runner, the event log,
// the integrity guard, the agent users and the process record are packages
// of their own — runner/worktree, runner/progress, runner/step,
// runner/event, runner/guard, runner/agentuser and runner/procrecord: they
// cannot name *job.)
func TestServicesHoldNoJob(t *testing.T) {
	jobType := reflect.TypeFor[*job]()
	for _, svc := range []any{itemRunner{}, itemDeps{}, prefixWriter{}} {
		typ := reflect.TypeOf(svc)
		seen := map[reflect.Type]bool{}
		var walk func(t2 reflect.Type, path string)
		walk = func(t2 reflect.Type, path string) {
			if t2 == jobType {
				t.Errorf("%s%s is a *job", typ.Name(), path)
				return
			}
			if seen[t2] {
				return
			}
			seen[t2] = true
			switch t2.Kind() {
			case reflect.Pointer, reflect.Slice, reflect.Array, reflect.Chan:
				walk(t2.Elem(), path)
			case reflect.Map:
				walk(t2.Key(), path)
				walk(t2.Elem(), path)
			case reflect.Struct:
				for i := range t2.NumField() {
					f := t2.Field(i)
					walk(f.Type, path+"."+f.Name)
				}
			}
		}
		walk(typ, "")
	}
}
