package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/checker"
	"github.com/lockbench/lockbench/history"
	"github.com/lockbench/lockbench/internal/config"
	"github.com/lockbench/lockbench/internal/links"
	"github.com/lockbench/lockbench/internal/machinery/procgroup"
	"github.com/lockbench/lockbench/internal/monoclock"
	"github.com/lockbench/lockbench/internal/premise"
	"github.com/lockbench/lockbench/internal/scenario"
	"github.com/lockbench/lockbench/internal/targets"
	"github.com/lockbench/lockbench/internal/worker"
)

// streamWorker runs readWorker over the lines given, as a worker whose
// process (true, or false when it crashes) has exited, and waits for the
// end of its stream.
func streamWorker(t *testing.T, tc *testCase, n history.Instance, crash bool, stop bool, lines ...string) *workerProc {
	t.Helper()
	bin := "true"
	if crash {
		bin = "false"
	}
	p, err := procgroup.StartProcess(n.String(), "runner-test", exec.Command(bin))
	if err != nil {
		t.Fatal(err)
	}
	w := &workerProc{n: n, name: n.String(), proc: p, ready: make(chan error, 1), done: make(chan struct{}), stop: stop}
	tc.workers[n] = w
	src := int(n)
	tc.r.m.addSource(src)
	tc.readWorker(w, src, io.NopCloser(strings.NewReader(strings.Join(lines, "\n")+"\n")))
	<-w.done
	return w
}

func line(t *testing.T, e history.Event) string {
	t.Helper()
	return string(history.AppendJSON(nil, &e))
}

// TestReadWorker: a worker's stream says it is ready, its reports are
// kept (and the harness's gauges take their maxima), its operations go to
// the history and tell who waits and who is inside a critical section in
// the store, a bad line is counted, and a worker that exits unasked
// leaves a crash mark naming the fault that killed it.
func TestReadWorker(t *testing.T) {
	tc := newTestCase(t, newFakeCluster("redis-1"))
	rep, _ := json.Marshal(worker.Report{Links: links.Snapshot{"redis-1": {Dials: 4}}, EmitLagMax: 7, Goroutines: 30, FDs: 12, HeapBytes: 1 << 20})
	now := func(d time.Duration) int64 { return tc.start + int64(d) }
	w := streamWorker(t, tc, 1, true, false,
		line(t, history.Event{T: now(1), Type: history.Mark, F: worker.MarkReady, Proc: "i1"}),
		line(t, history.Event{T: now(2), Type: history.Mark, F: worker.MarkReport, Meta: rep}),
		line(t, history.Event{T: now(3), Type: history.Invoke, F: history.OpAcquire, Proc: "i1c0", Key: "k0"}),
		line(t, history.Event{T: now(4), Type: history.OK, F: history.OpAcquire, Proc: "i1c0", Key: "k0"}),
		line(t, history.Event{T: now(5), Type: history.Invoke, F: history.OpAcquire, Proc: "i1c1", Key: "k0"}),
		line(t, history.Event{T: now(6), Type: history.Invoke, F: history.OpStore, Proc: "i1c0", Key: "k0"}),
		"this is no event",
	)
	if err := <-w.ready; err != nil {
		t.Errorf("ready: %v", err)
	}
	if w.report.Links["redis-1"].Dials != 4 || w.reportT != now(2) {
		t.Errorf("report: %+v at %d", w.report, w.reportT)
	}
	if tc.stats.WorkerGoroutines != 30 || tc.stats.WorkerFDs != 12 || tc.stats.EmitLagMaxNs != 7 || tc.stats.BadLines != 1 {
		t.Errorf("stats: %+v", tc.stats)
	}
	if !tc.waiting["i1c1"] || tc.waiting["i1c0"] || tc.storing["i1c0"] != "k0" || tc.r.acquired.Load() != 1 || tc.served["k0"] != now(4) {
		t.Errorf("waiting %v, storing %v, acquired %d, served %v", tc.waiting, tc.storing, tc.r.acquired.Load(), tc.served)
	}
	got := tc.marks(t)
	if len(got) != 5 || got[4] != "crash  exit status 1" {
		t.Errorf("history: %q", got)
	}
	if !strings.Contains(tc.log.String(), `bad event line "this is no event"`) {
		t.Errorf("log: %s", tc.log.String())
	}
}

// TestReadWorkerEnds: a worker that stops when asked leaves no crash
// mark; one that exits before it was ready says so; one killed by a fault
// is marked with that fault.
func TestReadWorkerEnds(t *testing.T) {
	tc := newTestCase(t, newFakeCluster())
	ready := line(t, history.Event{T: tc.start, Type: history.Mark, F: worker.MarkReady, Proc: "i1"})
	streamWorker(t, tc, 1, false, true, ready, line(t, history.Event{T: tc.start + 1, Type: history.Mark, F: worker.MarkStopped}))
	if got := tc.marks(t); len(got) != 0 {
		t.Errorf("a worker that stopped when asked: %q", got)
	}
	w := streamWorker(t, tc, 2, true, false)
	if err := <-w.ready; err == nil || !strings.Contains(err.Error(), "exited before it was ready") {
		t.Errorf("an instance that never was ready: %v", err)
	}
	tc = newTestCase(t, newFakeCluster())
	p, err := procgroup.StartProcess("instance-3", "runner-test", exec.Command("sleep", "60"))
	if err != nil {
		t.Fatal(err)
	}
	w = &workerProc{n: 3, name: "instance-3", proc: p, ready: make(chan error, 1), done: make(chan struct{}), killedBy: "kill-1"}
	tc.r.m.addSource(3)
	rd, wr := io.Pipe()
	go tc.readWorker(w, 3, rd)
	fmt.Fprintln(wr, line(t, history.Event{T: tc.start, Type: history.Mark, F: worker.MarkReady, Proc: "i3"}))
	p.Kill(5 * time.Second)
	wr.Close()
	<-w.done
	if got := tc.marks(t); len(got) != 1 || !strings.HasPrefix(got[0], "crash ") {
		t.Errorf("history: %q", got)
	}
	if !strings.Contains(tc.history.String(), `"fault":"kill-1"`) || !strings.Contains(tc.history.String(), `"proc":"i3"`) {
		t.Errorf("the crash mark does not name its instance and fault: %s", tc.history.String())
	}
}

// TestStopWorkersKillsTheLate: every worker is asked to stop; one that
// does not stop by the deadline is killed, and its exit is a crash.
func TestStopWorkersKillsTheLate(t *testing.T) {
	tc := newTestCase(t, newFakeCluster())
	tc.c.Workload.AcquireTimeout = 0
	tc.c.Workload.OpTimeout = 0
	p, err := procgroup.StartProcess("instance-1", "runner-test", exec.Command("sleep", "60"))
	if err != nil {
		t.Fatal(err)
	}
	var asked bytes.Buffer
	w := &workerProc{n: 1, name: "instance-1", proc: p, stdin: nopWriteCloser{&asked}, done: make(chan struct{})}
	tc.workers[1] = w
	go func() {
		<-p.Done()
		close(w.done)
	}()
	start := time.Now()
	if err := tc.stopWorkers(t.Context()); err != nil {
		t.Fatal(err)
	}
	if asked.String() != "stop\n" || p.Alive() || w.stop || !strings.Contains(w.stuck, "killed by the harness") {
		t.Errorf("asked %q, alive %v, stop %v, stuck %q", asked.String(), p.Alive(), w.stop, w.stuck)
	}
	if d := time.Since(start); d < 5*time.Second || d > time.Minute {
		t.Errorf("the late worker was killed after %s (grace: 5s)", d)
	}
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// TestCaseHelpers: what a case derives from its scenario: the servers
// whose clock must run under libfaketime, the need for a disk layer, the
// kinds of its servers, the keys' prefix, which cases share a cluster.
func TestCaseHelpers(t *testing.T) {
	src := `name: t
workload: {duration: 3s, instances: 2}
cases:
  - name: clock
    backend: postgres-lease
    faults:
      - {type: clock-jump, jump: 2s, target: postgres-1, at: 1s, for: 0s}
  - name: plain
    backend: redis
`
	s, err := scenario.Parse("t.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	clock, plain := s.Cases[0], s.Cases[1]
	if got := faketimeServers(clock); len(got) != 1 || got[0] != "postgres-1" {
		t.Errorf("faketime servers: %v", got)
	}
	if len(faketimeServers(plain)) != 0 || needsFuse(clock) || needsFuse(plain) {
		t.Error("a case without clock or power faults needs libfaketime or a disk layer")
	}
	if got := serverKinds([]backends.ServerSpec{{Kind: "redis"}, {Kind: "etcd"}, {Kind: "redis"}}); strings.Join(got, ",") != "etcd,redis" {
		t.Errorf("server kinds: %v", got)
	}
	tc := newTestCase(t, newFakeCluster())
	tc.idx = 2
	if p := tc.keyPrefix(); p != "" {
		t.Errorf("lockbench's own servers: prefix %q", p)
	}
	tc.reusedFrom = "a"
	if p := tc.keyPrefix(); p != "c3-" {
		t.Errorf("a reused cluster: prefix %q", p)
	}
	tc.r.id = "run1"
	tc.r.sc.Targets = &targets.File{}
	if p := tc.keyPrefix(); p != "lockbench-run1-c-" {
		t.Errorf("a targets file's servers: prefix %q", p)
	}
	if clusterKey(clock, tc.r.clusterOptions(clock, planLinks(clock))) == clusterKey(plain, tc.r.clusterOptions(plain, planLinks(plain))) {
		t.Error("two backends share a cluster")
	}
}

// TestSelectCases: -case picks cases by name or by row (every trial).
func TestSelectCases(t *testing.T) {
	sc := &scenario.Scenario{Path: "t.yaml", Cases: []*scenario.Case{{Name: "a.t1", Row: "a"}, {Name: "a.t2", Row: "a"}, {Name: "b", Row: "b"}}}
	if got, err := selectCases(sc, nil); err != nil || len(got) != 3 {
		t.Errorf("all: %d, %v", len(got), err)
	}
	if got, err := selectCases(sc, []string{"a"}); err != nil || len(got) != 2 {
		t.Errorf("row a: %d, %v", len(got), err)
	}
	if got, err := selectCases(sc, []string{"a.t2", "b"}); err != nil || len(got) != 2 || got[0].Name != "a.t2" {
		t.Errorf("by name: %v, %v", got, err)
	}
	if _, err := selectCases(sc, []string{"c"}); err == nil || !strings.Contains(err.Error(), `no case named "c" (cases: a.t1, a.t2, b)`) {
		t.Errorf("an unknown case: %v", err)
	}
	r := &run{seed: 5}
	if r.caseSeed(0) == r.caseSeed(1) || r.rng(1).Uint64() != r.rng(1).Uint64() {
		t.Error("case seeds are not distinct, or not replayed")
	}
}

// TestRunInfo: what run.json says of the machine comes from /proc, and
// what cannot be read is empty, not an error.
func TestRunInfo(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "cpuinfo")
	os.WriteFile(f, []byte("processor\t: 0\nmodel name\t: A CPU\n"), 0o644)
	if got := procField(f, "model name"); got != "A CPU" {
		t.Errorf("procField: %q", got)
	}
	if procField(filepath.Join(dir, "none"), "x") != "" || readFile(filepath.Join(dir, "none")) != "" {
		t.Error("a missing file says something")
	}
	if h := hostInfo(); h.CPUs < 1 || h.OS == "" || memoryMB() < 1 {
		t.Errorf("host: %+v", h)
	}
	v := versions(nil, false)
	if v["lockbench"] == "" {
		t.Errorf("versions: %v", v)
	}
}

// TestCaseWritten: each case's history lines are handed on once, as
// soon as they are written.
func TestCaseWritten(t *testing.T) {
	tc := newTestCase(t, newFakeCluster())
	hf, err := os.Create(filepath.Join(t.TempDir(), "history.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer hf.Close()
	tc.r.m = newMerger(history.NewWriter(hf), tc.r.base)
	var got []string
	hand := func(b []byte) { got = append(got, string(b)) }
	tc.r.m.emit(history.Event{Type: history.Mark, F: history.MarkCaseStart})
	tc.r.caseWritten(hf, hand)
	tc.r.caseWritten(hf, hand)
	tc.r.m.emit(history.Event{Type: history.Mark, F: history.MarkCaseEnd})
	tc.r.caseWritten(hf, hand)
	if len(got) != 2 || !strings.Contains(got[0], history.MarkCaseStart) || !strings.Contains(got[1], history.MarkCaseEnd) {
		t.Errorf("handed: %q", got)
	}
}

// TestWatchRecoveryPerKey: past the time the checker needs after the last
// heal, the case keeps running while some key a client asked for has not
// been acquired since the heal (one lane's lock served says nothing of
// another's), and stops once every one has.
func TestWatchRecoveryPerKey(t *testing.T) {
	tc := newTestCase(t, newFakeCluster())
	tc.c.Workload.TTL = config.Duration(time.Minute) // the bound: far away
	tc.c.Backend = leased{}
	tc.r.base -= int64(time.Minute) // a case under way
	heal := monoclock.Since(tc.r.base) - int64(checker.MinEvidence)
	tc.healed(heal)
	tc.served["k0"] = heal + 1 // lane 1: back
	tc.served["k1"] = heal - 1 // lane 2: last served before the heal
	done := make(chan struct{})
	go func() { tc.watchRecovery(context.Background()); close(done) }()
	// The watch must have looked at the keys (twice), not only had time
	// to: a machine too busy to run it for a while proves nothing here,
	// and is waited for.
	for looked := premise.Start(); tc.watchRounds.Load() < 2; time.Sleep(5 * time.Millisecond) {
		select {
		case <-done:
			t.Fatal("stopped watching while k1 had not been served since the heal")
		default:
		}
		if looked.Since() > time.Minute {
			t.Fatalf("the watch looked %d time(s) in a minute", tc.watchRounds.Load())
		}
	}
	select {
	case <-done:
		t.Fatal("stopped watching while k1 had not been served since the heal")
	default:
	}
	tc.liveMu.Lock()
	tc.served["k1"] = monoclock.Since(tc.r.base)
	tc.liveMu.Unlock()
	select {
	case <-done:
	case <-time.After(20 * time.Second): // its bound, the minute's lease, is further
		t.Fatal("still watching 20 s after every key was served")
	}
}

// TestWatchRecoveryUnavailable: a case that expects the lock to stay away
// (available: false) runs until MinEvidence has passed after the last
// heal, the clear window the checker needs to say so, and no longer,
// served or not. Its premise: the watch began while the end of that
// window was still ahead (a machine that stalled between the heal and
// the watch leaves nothing to wait for); unmet, the heal is put further
// ahead.
func TestWatchRecoveryUnavailable(t *testing.T) {
	premise.Retry(t, []time.Duration{400 * time.Millisecond, 2 * time.Second, 8 * time.Second}, func(ahead time.Duration) string {
		tc := newTestCase(t, newFakeCluster())
		// The ttl is the bound a case expecting the lock back would
		// watch up to: a minute, far beyond the no-longer check below.
		tc.c.Workload.TTL = config.Duration(time.Minute)
		tc.c.Backend = leased{}
		no := false
		tc.c.Expect.Available = &no
		tc.r.base -= int64(time.Minute)
		heal := monoclock.Since(tc.r.base) - int64(checker.MinEvidence) + int64(ahead)
		tc.healed(heal)
		tc.served["k0"] = heal - 1 // never back: must not keep it running
		due := heal + int64(checker.MinEvidence)
		left := time.Duration(due - monoclock.Since(tc.r.base))
		if left < ahead/4 {
			return fmt.Sprintf("the watch began %s before the window's end, of the %s put ahead", left, ahead)
		}
		tc.watchRecovery(context.Background())
		end := monoclock.Since(tc.r.base)
		if end < due {
			t.Errorf("stopped %s after the heal, before MinEvidence (%s)", time.Duration(end-heal), checker.MinEvidence)
		}
		if over := time.Duration(end - due); over > 30*time.Second {
			t.Errorf("watched %s past MinEvidence after the heal: the lock was not expected back, nothing to wait for", over)
		}
		return ""
	})
}

// leased is a backend whose lease is the workload's ttl (nothing else of
// it is used).
type leased struct{ backends.Backend }

func (leased) LeaseTime(ttl time.Duration) time.Duration { return ttl }

// TestPlanSeeds: each lane of a batch draws its clients' plan from a seed
// of its own, the first lane and a single case the case's; a case that
// gives plan_seed (a replay) has every lane draw that one.
func TestPlanSeeds(t *testing.T) {
	r := &run{seed: 5}
	one := &caseRun{r: r, c: &scenario.Case{}, idx: 2}
	if got := one.planSeeds(); len(got) != 1 || got[0] != r.caseSeed(2) {
		t.Errorf("a single case: %v", got)
	}
	batch := &caseRun{r: r, c: &scenario.Case{Lanes: 3, LaneInstances: 2}, idx: 2}
	got := batch.planSeeds()
	if len(got) != 3 || got[0] != r.caseSeed(2) || got[1] == got[0] || got[2] == got[1] {
		t.Errorf("a batch: %v", got)
	}
	if batch.trialInstance(5) != 1 || batch.laneOf(5) != 3 {
		t.Errorf("instance 5 is instance %d of lane %d", batch.trialInstance(5), batch.laneOf(5))
	}
	replay := &caseRun{r: r, c: &scenario.Case{Lanes: 3, LaneInstances: 2, PlanSeed: 99}, idx: 2}
	if got := replay.planSeeds(); got[0] != 99 || got[1] != 99 || got[2] != 99 {
		t.Errorf("a replay: %v", got)
	}
}
