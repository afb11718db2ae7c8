package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lockbench/lockbench/internal/exitcode"
	"github.com/lockbench/lockbench/internal/machinery/powerfs"
)

// killedScenarios: Redis writing on a FUSE layer under its data dir (each
// acquisition an append to its AOF, fsynced), with power losses every
// 600 ms (the server down for 300 ms, then restarted on what was durable
// and writing again) or a full disk (50 s) in force when the run is
// killed.
var killedScenarios = map[string]string{
	"power-loss": `
name: killed-power
workload: {duration: 1m, instances: 2, clients: 4, keys: {count: 8}, hold: {min: 1ms, max: 5ms}, think: {min: 0ms, max: 2ms}, abort_on_lost: false}
cases:
  - name: power
    backend: redis
    options: {persistence: always}
    faults:
      - {type: power-loss, target: redis-1, at: 1s, for: 300ms}
      - {type: power-loss, target: redis-1, at: 1600ms, for: 300ms}
      - {type: power-loss, target: redis-1, at: 2200ms, for: 300ms}
      - {type: power-loss, target: redis-1, at: 2800ms, for: 300ms}
`,
	"disk-full": `
name: killed-disk
workload: {duration: 1m, instances: 2, clients: 4, keys: {count: 8}, hold: {min: 1ms, max: 5ms}, think: {min: 0ms, max: 2ms}, abort_on_lost: false}
cases:
  - name: disk
    backend: redis
    options: {persistence: everysec}
    faults: [{type: disk-full, target: redis-1, at: 1s, for: 50s}]
`,
}

// killedRun is one run of the kill test, as it went.
type killedRun struct {
	fault, how string
	delay      time.Duration // after the fault was in force
	procs      int           // the run's processes when it was killed
	serverUp   bool          // redis-server among them: writing on its layer
	gone       time.Duration // until the last of them was gone
	inD        int           // samples of one of them in uninterruptible sleep
	exit       int
	repaired   []string // what the next run said it repaired of this one
}

// TestKilledRunWithALayerLeavesNothingStuck replays issue 41's FUSE hole
// with real runs: ten runs of bench on Redis killed by SIGKILL while a
// power loss is in force (at five moments of it, twice), one while a
// full disk is, and one of each ended by a double SIGINT. After each, no
// process of the run stays, none in uninterruptible sleep; the next run
// says what it repaired of it (the dead run's FUSE connection aborted, its
// layer unmounted, its data dir removed); nothing is left mounted at the
// end.
func TestKilledRunWithALayerLeavesNothingStuck(t *testing.T) {
	integration(t)
	if err := powerfs.Available(); err != nil {
		t.Skip(err)
	}
	// The runs' data dirs, out of other runs' sweeps: the next run of
	// this test is the one that must repair them.
	tmp := t.TempDir()
	scens := map[string]string{}
	for f, body := range killedScenarios {
		scens[f] = writeScenario(t, body)
	}
	type plan struct {
		fault, how string
		delay      time.Duration
	}
	var plans []plan
	// Ten moments over two power losses: the server down (in force),
	// restarting, and writing on its layer again.
	for i := 0; i < 10; i++ {
		plans = append(plans, plan{"power-loss", "SIGKILL", time.Duration(i) * 130 * time.Millisecond})
	}
	plans = append(plans, plan{"disk-full", "SIGKILL", time.Second}, plan{"power-loss", "double SIGINT", time.Second}, plan{"disk-full", "double SIGINT", time.Second})
	var runs []*killedRun
	var prevPid int
	for i, p := range plans {
		kr, pid, log := killRun(t, tmp, scens[p.fault], p.fault, p.how, p.delay)
		if i > 0 {
			runs[i-1].repaired = repairsOf(log, prevPid)
		}
		runs = append(runs, kr)
		prevPid = pid
	}
	// A last run repairs what the last killed one left.
	_, log, _ := benchLog(t, tmp, writeScenario(t, "name: after\nworkload: {duration: 500ms}\ncases: [{name: a, backend: redis}]\n"), nil)
	runs[len(runs)-1].repaired = repairsOf(log, prevPid)

	var rows []string
	for i, r := range runs {
		rows = append(rows, fmt.Sprintf("%2d %-10s %-13s +%-6s %d procs (redis-server up: %-5v), gone in %-6s D-state samples %d, exit %d, next run: %s",
			i+1, r.fault, r.how, r.delay, r.procs, r.serverUp, r.gone.Round(time.Millisecond), r.inD, r.exit, strings.Join(r.repaired, "; ")))
		switch {
		case r.how == "double SIGINT" && r.exit != int(exitcode.Harness):
			t.Errorf("run %d: a double SIGINT exited %d, want %d (teardown abandoned, not 105)", i+1, r.exit, exitcode.Harness)
		}
		all := strings.Join(r.repaired, "\n")
		if r.how == "SIGKILL" && (!strings.Contains(all, "unmounted ") || !strings.Contains(all, "removed data dir ")) {
			t.Errorf("run %d: the next run did not say it unmounted the dead layer and removed the data dir: %q", i+1, r.repaired)
		}
	}
	t.Logf("runs killed with a FUSE layer in force:\n%s", strings.Join(rows, "\n"))
	if m, err := powerfs.Mounted(tmp); err != nil || len(m) > 0 {
		t.Errorf("left mounted after the repairs: %v %v", m, err)
	}
	if d, _ := filepath.Glob(filepath.Join(tmp, "lockbench-data-*")); len(d) > 0 {
		t.Errorf("data dirs left after the repairs: %v", d)
	}
}

// killRun starts a run, waits for its fault to be in force, waits delay
// more, ends it (how) and watches its processes go.
func killRun(t *testing.T, tmp, scen, fault, how string, delay time.Duration) (*killedRun, int, string) {
	t.Helper()
	kr := &killedRun{fault: fault, how: how, delay: delay}
	var procs []int
	pid, log, exit := benchLog(t, tmp, scen, func(pid int, line string) bool {
		if !strings.Contains(line, "fault "+fault+"-1: "+fault+" on") {
			return false
		}
		time.Sleep(delay)
		procs = descendants(pid)
		for _, p := range procs {
			if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", p)); strings.HasPrefix(string(b), "redis-server") {
				kr.serverUp = true
			}
		}
		if how == "SIGKILL" {
			syscall.Kill(pid, syscall.SIGKILL)
		} else {
			syscall.Kill(pid, syscall.SIGINT)
			time.Sleep(5 * time.Millisecond) // the second mid-teardown
			syscall.Kill(pid, syscall.SIGINT)
		}
		return true
	})
	kr.exit, kr.procs = exit, len(procs)
	start := time.Now()
	for left := procs; len(left) > 0; time.Sleep(10 * time.Millisecond) {
		var still []int
		for _, p := range left {
			switch st := procState(p); st {
			case "":
			case "D":
				kr.inD++
				still = append(still, p)
			default:
				still = append(still, p)
			}
		}
		left = still
		if time.Since(start) > 2*time.Minute {
			t.Errorf("%s of a run with %s in force: processes %v still there two minutes later", how, fault, left)
			break
		}
	}
	kr.gone = time.Since(start)
	return kr, pid, log
}

// benchLog runs bench run on scen with TMPDIR tmp, reading its log line by
// line; at (when given) is called with each, and once it returns true the
// rest is read to the end. It returns the run's pid, its log and its exit
// code.
func benchLog(t *testing.T, tmp, scen string, at func(pid int, line string) bool) (int, string, int) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "run", "-dir", filepath.Join(t.TempDir(), "out"), scen)
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	errp, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	r := bufio.NewReader(errp)
	for done := at == nil; !done; {
		line, err := r.ReadString('\n')
		log.WriteString(line)
		if err != nil {
			cmd.Wait()
			t.Fatalf("the run ended before its fault was in force:\n%s", log.String())
		}
		done = at(cmd.Process.Pid, line)
	}
	rest, _ := io.ReadAll(r)
	log.Write(rest)
	err = cmd.Wait()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	}
	return cmd.Process.Pid, log.String(), code
}

// descendants lists pid's processes: its children, theirs, and so on.
func descendants(pid int) []int {
	parent := map[int]int{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) > 1 {
			parent[p], _ = strconv.Atoi(f[1])
		}
	}
	var out []int
	var walk func(int)
	walk = func(pp int) {
		for c, par := range parent {
			if par == pp {
				out = append(out, c)
				walk(c)
			}
		}
	}
	walk(pid)
	return out
}

// procState is a process's state letter ("" once it is gone or a zombie).
func procState(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) == 0 || f[0] == "Z" {
		return ""
	}
	return f[0]
}

// repairsOf is what a run's log says it repaired of the run of pid.
func repairsOf(log string, pid int) []string {
	var out []string
	for _, line := range strings.Split(log, "\n") {
		if strings.HasPrefix(line, "repair: ") && strings.Contains(line, fmt.Sprintf("run %d,", pid)) {
			out = append(out, strings.TrimPrefix(line, "repair: "))
		}
	}
	return out
}
