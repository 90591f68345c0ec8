//go:build linux

package procsup

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// procTablePlatform is the Linux state of a procTable.
type procTablePlatform struct {
	spawns chan func() // run on the spawner thread
	sid    int         // this process's session
	wd     *os.File    // the watchdog's stdin; nil when it is not running
	wdOff  bool        // the watchdog could not start; do not retry
}

// stepSysProcAttr puts a step's process in its own process group, and
// kills it when the thread that started it dies: that thread is the
// spawner's, which lives as long as the process.
func stepSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// setup runs once, before the first step starts: the spawner thread, the
// subreaper attribute and the reaper of adopted processes.
func (t *procTable) setup() {
	t.sid, _ = unix.Getsid(0)
	t.spawns = make(chan func())
	go func() {
		// Pdeathsig fires when the *thread* that forked the child exits
		// (prctl(2); golang/go#27505). This goroutine keeps its thread locked
		// and never returns, so the thread lives as long as the process.
		runtime.LockOSThread()
		for f := range t.spawns {
			f()
		}
	}()
	// Orphaned descendants of steps (setsid'd ones included) are reparented
	// to this process instead of init, so they can be found and ended.
	_ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGCHLD)
	go func() {
		for range sigs {
			t.reapAdopted()
			// Every git process the job starts ends with a SIGCHLD, and a
			// pass reads every thread's children list: at most one pass
			// per reapPause (signals meanwhile collapse into one), so an
			// adopted zombie lingers at most that long.
			time.Sleep(reapPause)
		}
	}()
}

// reapPause is the least time between two passes of reapAdopted.
const reapPause = 100 * time.Millisecond

// start starts cmd (on the spawner thread) and registers its group.
func (t *procTable) start(cmd *exec.Cmd, g *stepGroup) error {
	t.once.Do(t.setup)
	errc := make(chan error, 1)
	t.spawns <- func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		t.ensureWatchdog()
		if err := cmd.Start(); err != nil {
			errc <- err
			return
		}
		g.pgid = cmd.Process.Pid
		t.live[g.pgid] = g
		t.tellWatchdog("add", g.pgid)
		errc <- nil
	}
	return <-errc
}

// end kills g's process group and every descendant still carrying g's tag
// (SIGKILL), reaps the ones reparented to this process, and returns once
// they are gone, or an error naming the stragglers after limit.
func (t *procTable) end(g *stepGroup, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	killed := map[int]bool{}
	pause := time.Millisecond
	for {
		groupErr := syscall.Kill(-g.pgid, syscall.SIGKILL)
		groupGone := errors.Is(groupErr, syscall.ESRCH)
		busy := t.sweep(g, killed)
		if groupGone && !busy {
			t.mu.Lock()
			delete(t.live, g.pgid)
			t.tellWatchdog("del", g.pgid)
			t.mu.Unlock()
			return nil
		}
		if time.Now().After(deadline) {
			t.mu.Lock()
			delete(t.live, g.pgid)
			if groupGone {
				t.tellWatchdog("del", g.pgid)
			}
			t.mu.Unlock()
			return fmt.Errorf("processes of the step (process group %d) were still running %s after it ended", g.pgid, limit)
		}
		time.Sleep(pause)
		pause = min(2*pause, 20*time.Millisecond)
	}
}

// sweep kills or reaps this process's children that belong to g: members
// of its group, processes carrying its tag, and the ones sweep killed
// before. It reports whether it found any (their own children may have
// been reparented since, so the caller sweeps again).
func (t *procTable) sweep(g *stepGroup, killed map[int]bool) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	busy := false
	for _, pid := range childPIDs() {
		if _, leader := t.live[pid]; leader {
			continue // os/exec waits for it
		}
		st, err := readProcStat(pid)
		if err != nil {
			continue
		}
		zombie := st.state == 'Z'
		if st.pgrp != g.pgid && !killed[pid] && (zombie || processTag(pid) != g.tag) {
			continue
		}
		busy = true
		if zombie {
			var ws unix.WaitStatus
			_, _ = unix.Wait4(pid, &ws, unix.WNOHANG, nil)
			continue
		}
		_ = syscall.Kill(pid, syscall.SIGKILL)
		killed[pid] = true
	}
	return busy
}

// reapAdopted reaps zombie children this process adopted as a subreaper
// and that nobody else waits for: members of step groups, and processes
// of another session (setsid'd descendants, detached git daemons). The
// processes os/exec started (same session, no step group) are left to
// their Wait.
func (t *procTable) reapAdopted() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, pid := range childPIDs() {
		if _, leader := t.live[pid]; leader {
			continue
		}
		st, err := readProcStat(pid)
		if err != nil || st.state != 'Z' {
			continue
		}
		if _, inStep := t.live[st.pgrp]; inStep || st.session != t.sid {
			var ws unix.WaitStatus
			_, _ = unix.Wait4(pid, &ws, unix.WNOHANG, nil)
		}
	}
}

// KillProcesses ends at once (SIGKILL) every step process group this
// process runs and every process carrying one of their tags, also ones that
// left their group, and waits (briefly) until they are gone. It returns the
// number of step process groups that were running.
//
// It is the hard abort of a second Ctrl-C: the steps fail as interrupted
// and the job is left as a crash would leave it, for `resume`.
func KillProcesses() int {
	t := procs
	t.mu.Lock()
	pgids := make([]int, 0, len(t.live))
	for pgid := range t.live {
		pgids = append(pgids, pgid)
	}
	t.mu.Unlock()
	prefix := t.nonce + "/"
	ours := func(p procInfo) bool { return strings.HasPrefix(p.tag, prefix) }
	_ = killUntilGone(pgids, ours, 3*time.Second)
	return len(pgids)
}

// killUntilGone kills the groups and every live process matching ours,
// again and again until none is left or limit passes; it returns the pids
// still alive then.
func killUntilGone(pgids []int, ours func(procInfo) bool, limit time.Duration) []int {
	deadline := time.Now().Add(limit)
	for {
		for _, pg := range pgids {
			_ = syscall.Kill(-pg, syscall.SIGKILL)
		}
		var alive []int
		for _, p := range snapshotProcs() {
			if p.stat.state == 'Z' || p.pid == os.Getpid() {
				continue
			}
			if ours(p) || containsInt(pgids, p.stat.pgrp) {
				_ = syscall.Kill(p.pid, syscall.SIGKILL)
				alive = append(alive, p.pid)
			}
		}
		if len(alive) == 0 || time.Now().After(deadline) {
			return alive
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func containsInt(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// EndLeftovers ends what an earlier execution of the job left running
// (the job of key, see Recorder.JobKey; jobID names it in errors): the recorded groups that still belong to it (same boot, leader
// with the recorded start time, or a member carrying the job's tag) and
// every process carrying the job's tag. It waits until they are gone and
// returns the number of processes it found.
func EndLeftovers(key, jobID string, groups []Group) (int, error) {
	boot := bootID()
	snap := snapshotProcs()
	ours := func(pi procInfo) bool { return pi.tag != "" && tagJobKey(pi.tag) == key }
	var pgids []int
	for _, e := range groups {
		if e.BootID == "" || e.BootID != boot {
			continue // another boot: the pgid means nothing now
		}
		if belongsToJob(e, snap, ours) {
			pgids = append(pgids, e.PGID)
		}
	}
	found := 0
	for _, pi := range snap {
		if pi.stat.state != 'Z' && pi.pid != os.Getpid() && (ours(pi) || containsInt(pgids, pi.stat.pgrp)) {
			found++
		}
	}
	if found == 0 {
		return 0, nil
	}
	if alive := killUntilGone(pgids, ours, groupEndLimit); len(alive) > 0 {
		return found, fmt.Errorf("processes of an earlier run of job %s are still running (pids %v) and cannot be killed", jobID, alive)
	}
	return found, nil
}

// belongsToJob reports whether the recorded group e is still the job's: its
// leader is the recorded process, or (leader gone) a member carries the
// job's tag. A pgid is only reused once the old group is empty.
func belongsToJob(e Group, snap []procInfo, ours func(procInfo) bool) bool {
	for _, pi := range snap {
		if pi.pid == e.PGID && pi.stat.pgrp == e.PGID {
			return pi.stat.start == e.LeaderStart
		}
	}
	for _, pi := range snap {
		if pi.stat.pgrp == e.PGID && ours(pi) {
			return true
		}
	}
	return false
}

// leaderIdentity returns what identifies the process pid across time: the
// boot and its start time.
func leaderIdentity(pid int) (boot string, start uint64) {
	st, err := readProcStat(pid)
	if err != nil {
		return "", 0
	}
	return bootID(), st.start
}

func bootID() string {
	data, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(data))
}

// procStat is the part of /proc/<pid>/stat the runner reads.
type procStat struct {
	state   byte
	pgrp    int
	session int
	start   uint64 // clock ticks after boot
}

func readProcStat(pid int) (procStat, error) {
	data, err := readProcFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, err
	}
	return parseProcStat(data)
}

// readProcFile reads a /proc file with plain system calls: open, read
// until end of file, close. (os.ReadFile also registers the file with the
// poller, four more calls, and /proc is read on every step's end and
// every SIGCHLD pass.)
func readProcFile(path string) ([]byte, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	buf := make([]byte, 0, 512)
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := unix.Read(fd, buf[len(buf):cap(buf)])
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return nil, &os.PathError{Op: "read", Path: path, Err: err}
		}
		if n == 0 {
			return buf, nil
		}
		buf = buf[:len(buf)+n]
	}
}

// parseProcStat parses "pid (comm) state ppid pgrp session … starttime …";
// comm may hold spaces and parentheses, so fields start after the last ')'.
func parseProcStat(data []byte) (procStat, error) {
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return procStat{}, errors.New("malformed /proc stat")
	}
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 20 {
		return procStat{}, errors.New("short /proc stat")
	}
	pgrp, err1 := strconv.Atoi(f[2])
	sess, err2 := strconv.Atoi(f[3])
	start, err3 := strconv.ParseUint(f[19], 10, 64)
	if err := errors.Join(err1, err2, err3); err != nil {
		return procStat{}, fmt.Errorf("malformed /proc stat: %w", err)
	}
	return procStat{state: f[0][0], pgrp: pgrp, session: sess, start: start}, nil
}

// processTag returns the process tag in pid's environment ("" when it has
// none or it cannot be read: another user's process, or a zombie).
func processTag(pid int) string {
	data, err := readProcFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		return ""
	}
	return tagInEnviron(data)
}

func tagInEnviron(data []byte) string {
	prefix := []byte(TagEnv + "=")
	tag := ""
	for _, kv := range bytes.Split(data, []byte{0}) {
		if bytes.HasPrefix(kv, prefix) {
			tag = string(kv[len(prefix):]) // the last one wins, as in exec
		}
	}
	return tag
}

// haveChildrenFiles reports whether the kernel has
// /proc/<pid>/task/<tid>/children (CONFIG_PROC_CHILDREN).
var haveChildrenFiles = sync.OnceValue(func() bool {
	_, err := os.Stat("/proc/self/task/" + strconv.Itoa(os.Getpid()) + "/children")
	return err == nil
})

// childPIDs lists the children this process adopted as a subreaper, and
// more: the children of its main thread. The kernel hands an orphan to the
// first live thread of the subreaper (find_alive_thread: the thread group
// leader, which lives as long as a Go process does), so adopted processes
// are always there; processes this process started itself are children of
// the thread that started them, and os/exec waits for those (step leaders
// are skipped by the callers). One file instead of one per thread: this
// runs at every step's end and on SIGCHLD.
func childPIDs() []int {
	if !haveChildrenFiles() {
		return childPIDsByScan()
	}
	pid := strconv.Itoa(os.Getpid())
	data, err := readProcFile("/proc/" + pid + "/task/" + pid + "/children")
	if err != nil {
		return childPIDsByScan()
	}
	var out []int
	for _, f := range strings.Fields(string(data)) {
		if n, err := strconv.Atoi(f); err == nil {
			out = append(out, n)
		}
	}
	return out
}

// childPIDsByScan is childPIDs for kernels without
// /proc/<pid>/task/<tid>/children.
func childPIDsByScan() []int {
	me := os.Getpid()
	var out []int
	for _, pid := range allPIDs() {
		data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(data, ')')
		if i < 0 {
			continue
		}
		if f := strings.Fields(string(data[i+1:])); len(f) > 1 && f[1] == strconv.Itoa(me) {
			out = append(out, pid)
		}
	}
	return out
}

func allPIDs() []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	out := make([]int, 0, len(entries))
	for _, e := range entries {
		if n, err := strconv.Atoi(e.Name()); err == nil {
			out = append(out, n)
		}
	}
	return out
}

// procInfo is one process of a /proc snapshot.
type procInfo struct {
	pid  int
	stat procStat
	tag  string
}

// snapshotProcs reads every process's stat and tag (the ones this user can
// read).
func snapshotProcs() []procInfo {
	var out []procInfo
	for _, pid := range allPIDs() {
		st, err := readProcStat(pid)
		if err != nil {
			continue
		}
		out = append(out, procInfo{pid: pid, stat: st, tag: processTag(pid)})
	}
	return out
}

// ensureWatchdog starts the watchdog unless it runs; t.mu is held.
func (t *procTable) ensureWatchdog() {
	if t.wd != nil || t.wdOff {
		return
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.wdOff = true
		return
	}
	r, w, err := os.Pipe()
	if err != nil {
		return
	}
	cmd := exec.Command(bash, "-c", watchdogScript, "prodigy-action-watchdog", t.nonce)
	cmd.Stdin = r
	// Its own group: a Ctrl-C at the terminal must not end it before the
	// runner.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = cmd.Start()
	r.Close()
	if err != nil {
		w.Close()
		t.wdOff = true
		return
	}
	t.wd = w
	for pgid := range t.live {
		t.tellWatchdog("add", pgid)
	}
	go func() {
		_ = cmd.Wait()
		t.mu.Lock()
		defer t.mu.Unlock()
		if t.wd == w {
			t.wd = nil // restarted at the next step
			w.Close()
		}
	}()
}

// tellWatchdog registers (add) or unregisters (del) a group; t.mu is held.
func (t *procTable) tellWatchdog(op string, pgid int) {
	if t.wd == nil {
		return
	}
	if _, err := fmt.Fprintf(t.wd, "%s %d\n", op, pgid); err != nil {
		t.wd.Close()
		t.wd = nil
	}
}

// watchdogScript reads "add PGID"/"del PGID" lines from the runner. At end
// of input, which means the runner exited or was killed, it kills the
// groups still registered and every process tagged with the runner's nonce
// ($1), a few rounds until none is left.
const watchdogScript = `
trap '' INT HUP QUIT TERM PIPE
nonce=$1
declare -A groups=()
while read -r op pgid; do
  case $op in
    add) groups[$pgid]=1 ;;
    del) unset "groups[$pgid]" ;;
  esac
done
for round in 1 2 3 4 5 6 7 8 9 10; do
  found=0
  for pgid in "${!groups[@]}"; do
    kill -KILL -- "-$pgid" 2>/dev/null && found=1
  done
  for dir in /proc/[0-9]*; do
    pid=${dir#/proc/}
    [[ $pid == "$$" ]] && continue
    while IFS= read -r -d '' kv; do
      if [[ $kv == "PRODIGY_PROCESS_TAG=$nonce/"* ]]; then
        kill -KILL "$pid" 2>/dev/null && found=1
        break
      fi
    done 2>/dev/null <"$dir/environ"
  done
  (( found )) || break
  sleep 0.05
done
`
