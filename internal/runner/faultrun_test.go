package runner

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockbench/lockbench/faults"
	"github.com/lockbench/lockbench/history"
	"github.com/lockbench/lockbench/internal/monoclock"
	"github.com/lockbench/lockbench/internal/premise"
)

// TestRunFaultRecordsWhatHappened: a fault applied, observed and healed
// is recorded with its window and every observation, and marked in the
// history from its start to its end.
func TestRunFaultRecordsWhatHappened(t *testing.T) {
	tc := newTestCase(t, newFakeCluster("redis-1"))
	f := &scripted{check: "it held"}
	tc.runFault(context.Background(), fault("test", f, "redis-1"), 0, 0)
	recs := tc.faultRecords(t)
	if len(recs) != 1 {
		t.Fatalf("records: %+v", recs)
	}
	r := recs[0]
	if !r.Applied || r.Target != "redis-1" || r.Resolved != "redis-1" || r.StartNs == 0 || r.EndNs < r.StartNs+int64(10*time.Millisecond) {
		t.Errorf("record: %+v", r)
	}
	if want := []string{"hit redis-1", "it held", "healed redis-1"}; !slices.Equal(r.Observed, want) {
		t.Errorf("observed %q, want %q", r.Observed, want)
	}
	if r.Error != "" || r.HealError != "" || r.Idle != "" || r.Unobserved != "" {
		t.Errorf("a clean fault recorded trouble: %+v", r)
	}
	if got := tc.marks(t); !slices.Equal(got, []string{"fault-start redis-1", "fault-end redis-1"}) {
		t.Errorf("marks: %q", got)
	}
	if tc.dirty.Load() {
		t.Error("a clean fault on a server that lasts nothing dirtied the cluster")
	}
	if tc.lastHeal != r.EndNs {
		t.Errorf("the heal is known at %d, recorded at %d", tc.lastHeal, r.EndNs)
	}
}

// TestRunFaultIdleAndUnobserved: a check that says nothing used the
// target is recorded idle, one that failed unobserved, each with its
// mark; the fault is healed either way.
func TestRunFaultIdleAndUnobserved(t *testing.T) {
	for _, tt := range []struct {
		err  error
		mark string
	}{
		{&faults.IdleError{Msg: "nothing crossed"}, history.MarkFaultIdle},
		{errors.New("not seen"), history.MarkFaultUnobserved},
	} {
		tc := newTestCase(t, newFakeCluster("redis-1"))
		f := &scripted{checkErr: tt.err}
		tc.runFault(context.Background(), fault("test", f, "redis-1"), 0, 0)
		r := tc.faultRecords(t)[0]
		switch tt.mark {
		case history.MarkFaultIdle:
			if r.Idle != "nothing crossed" || r.Unobserved != "" {
				t.Errorf("idle: %+v", r)
			}
		default:
			if r.Unobserved != "not seen" || r.Idle != "" {
				t.Errorf("unobserved: %+v", r)
			}
		}
		if f.healed != 1 {
			t.Errorf("%s: healed %d times", tt.mark, f.healed)
		}
		if got := tc.marks(t); !slices.Contains(got, tt.mark+" redis-1 "+tt.err.Error()) {
			t.Errorf("marks: %q", got)
		}
	}
}

// TestRunFaultHealError: a heal that fails is recorded, marked, and
// leaves the cluster dirty (not handed to the next case).
func TestRunFaultHealError(t *testing.T) {
	tc := newTestCase(t, newFakeCluster("redis-1"))
	tc.runFault(context.Background(), fault("test", &scripted{healErr: errors.New("stuck")}, "redis-1"), 0, 0)
	r := tc.faultRecords(t)[0]
	if r.HealError != "stuck" || !r.Applied {
		t.Errorf("record: %+v", r)
	}
	if !tc.dirty.Load() {
		t.Error("a failed heal left the cluster reusable")
	}
	if got := tc.marks(t); !slices.Contains(got, "fault-end redis-1 stuck") {
		t.Errorf("marks: %q", got)
	}
}

// TestRunFaultStartError: a fault that cannot be applied is recorded with
// its error, never as applied, and dirties the cluster.
func TestRunFaultStartError(t *testing.T) {
	tc := newTestCase(t, newFakeCluster("redis-1"))
	tc.runFault(context.Background(), fault("test", &scripted{start: []error{errors.New("refused")}}, "redis-1"), 0, 0)
	r := tc.faultRecords(t)[0]
	if r.Applied || r.Error != "refused" || r.StartNs != 0 {
		t.Errorf("record: %+v", r)
	}
	if !tc.dirty.Load() {
		t.Error("a fault that failed half-way left the cluster reusable")
	}
	if got := tc.marks(t); !slices.Equal(got, []string{"fault-error redis-1 refused"}) {
		t.Errorf("marks: %q", got)
	}
}

// TestRunFaultTargetNotHealthy: a target that is not running is not
// faulted: the record says why.
func TestRunFaultTargetNotHealthy(t *testing.T) {
	fc := newFakeCluster("redis-1")
	fc.servers["redis-1"].Alive = false
	tc := newTestCase(t, fc)
	f := &scripted{}
	tc.runFault(context.Background(), fault("test", f, "redis-1"), 0, 0)
	if r := tc.faultRecords(t)[0]; !strings.Contains(r.Error, "not healthy before injection: redis-1 is not running") {
		t.Errorf("record: %+v", r)
	}
	if len(f.hit) != 0 {
		t.Error("a dead server was faulted")
	}
	tc2 := newTestCase(t, newFakeCluster())
	tc2.runFault(context.Background(), fault("test", &scripted{}, "link:redis-1"), 0, 0)
	if r := tc2.faultRecords(t)[0]; !strings.Contains(r.Error, "link redis-1: no proxy redis-1") {
		t.Errorf("a link with no proxy: %+v", r)
	}
}

// TestRunFaultCaseEndsFirst: a fault whose time never comes is recorded
// as such.
func TestRunFaultCaseEndsFirst(t *testing.T) {
	tc := newTestCase(t, newFakeCluster("redis-1"))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	f := fault("test", &scripted{}, "redis-1")
	f.At = time.Hour
	tc.runFault(ctx, f, 0, 0)
	if r := tc.faultRecords(t)[0]; r.Error != "the case ended before the fault's time" {
		t.Errorf("record: %+v", r)
	}
}

// TestRunFaultLastingDirties: a lasting fault (a kill: the server was
// restarted) on a server dirties the cluster; on an instance it does not.
func TestRunFaultLastingDirties(t *testing.T) {
	tc := newTestCase(t, newFakeCluster("redis-1"))
	tc.runFault(context.Background(), fault("kill", &scripted{}, "redis-1"), 0, 0)
	if !tc.dirty.Load() {
		t.Error("a kill of a server left the cluster reusable")
	}
	tc = newTestCase(t, newFakeCluster("redis-1"))
	tc.worker(t, 1, "redis-1")
	tc.runFault(context.Background(), fault("kill", &scripted{}, "instance-1"), 0, 0)
	if tc.dirty.Load() {
		t.Error("a kill of an instance dirtied the cluster")
	}
}

// TestRunFaultResolvesAgainWhenTheRoleWasLeft: a fault that says its
// target had left the role it was resolved from is resolved again, and
// the record says how often; past maxRoleTries the fault fails.
func TestRunFaultResolvesAgainWhenTheRoleWasLeft(t *testing.T) {
	tc := newTestCase(t, newFakeCluster("redis-1"))
	tc.worker(t, 1, "redis-1")
	tc.worker(t, 2, "redis-1")
	tc.storing["i2c0"] = "k0"
	left := &faults.RoleLeftError{Msg: "instance-2 had left its critical section when it stopped"}
	f := &scripted{start: []error{left, left}}
	tc.runFault(context.Background(), fault("pause", f, "holder"), 0, 0)
	r := tc.faultRecords(t)[0]
	if !r.Applied || r.Target != "holder" || r.Resolved != "instance-2" || len(f.hit) != 3 {
		t.Fatalf("record %+v after %d tries", r, len(f.hit))
	}
	if f.hit[0].From != faults.RoleHolder {
		t.Errorf("the fault was not told its target came from the holder role: %+v", f.hit[0])
	}
	if !strings.Contains(r.Observed[0], "the holder was resolved 3 times: 2 had left the role") {
		t.Errorf("observed: %q", r.Observed)
	}
	if !strings.Contains(tc.log.String(), "undone, resolving the holder again") {
		t.Errorf("log: %s", tc.log.String())
	}

	tc = newTestCase(t, newFakeCluster("redis-1"))
	tc.worker(t, 1, "redis-1")
	tc.storing["i1c0"] = "k0"
	always := &scripted{}
	for range maxRoleTries {
		always.start = append(always.start, left)
	}
	tc.runFault(context.Background(), fault("pause", always, "holder"), 0, 0)
	if r := tc.faultRecords(t)[0]; r.Applied || !strings.Contains(r.Error, "10 times: the holder could not be hit while it played the role") {
		t.Errorf("a holder always gone: %+v", r)
	}
}

// TestRunFaultOnASet: a fault on a set of targets hits each one and is
// recorded once, with the set.
func TestRunFaultOnASet(t *testing.T) {
	tc := newTestCase(t, newFakeCluster("etcd-1", "etcd-2"))
	f := &scripted{check: "held"}
	tc.runFault(context.Background(), fault("test", f, "etcd-1", "etcd-2"), 0, 0)
	r := tc.faultRecords(t)[0]
	if r.Target != "etcd-1,etcd-2" || r.Resolved != "etcd-1,etcd-2" || len(f.hit) != 2 || f.healed != 2 {
		t.Errorf("record %+v; hit %v, healed %d", r, f.hit, f.healed)
	}
	if !slices.Contains(r.Observed, "etcd-1: held; etcd-2: held") {
		t.Errorf("observed: %q", r.Observed)
	}
}

// TestStartAll: a set's members are started in turn, observed together
// and healed at once; one that cannot be started undoes those before it.
func TestStartAll(t *testing.T) {
	ts := []faults.Target{faults.ServerTarget("a"), faults.ServerTarget("b"), faults.ServerTarget("c")}
	ctx := context.Background()
	f := &scripted{start: []error{nil, errors.New("b refused")}}
	if _, err := startAll(ctx, f, nil, ts); err == nil || !strings.Contains(err.Error(), "b: b refused") {
		t.Fatalf("a member refused: %v", err)
	}
	if f.healed != 1 || len(f.hit) != 2 {
		t.Errorf("after b refused: %d hit, %d healed (a must be undone, c never hit)", len(f.hit), f.healed)
	}

	idle := &faults.IdleError{Msg: "idle"}
	for _, tt := range []struct {
		name  string
		errs  []error
		want  string
		isErr string
	}{
		{"all observed", []error{nil, nil, nil}, "a: ok; b: ok; c: ok", ""},
		{"one idle", []error{nil, idle, nil}, "a: ok; c: ok; idle (nothing used them): b", ""},
		{"all idle", []error{idle, idle, idle}, "", "nothing used any of a, b, c"},
		{"one failed", []error{nil, errors.New("no"), idle}, "", "b: no"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var effs []*faults.Effect
			set := make([]*faults.Effect, 3)
			for i, err := range tt.errs {
				set[i] = &faults.Effect{Seen: "s", Check: func(context.Context) (string, error) { return "ok", err }, Heal: func(context.Context) (string, error) { return "", nil }}
			}
			effs = set
			eff, err := startAll(ctx, effectsFault(effs), nil, ts)
			if err != nil {
				t.Fatal(err)
			}
			got, err := eff.Check(ctx)
			switch {
			case tt.isErr != "" && (err == nil || !strings.Contains(err.Error(), tt.isErr)):
				t.Errorf("check: %q, %v; want an error with %q", got, err, tt.isErr)
			case tt.isErr == "" && (err != nil || got != tt.want):
				t.Errorf("check: %q, %v; want %q", got, err, tt.want)
			}
			if eff.Seen != "s; s; s" {
				t.Errorf("seen %q", eff.Seen)
			}
		})
	}

	heals := &scripted{healErr: errors.New("stuck")}
	eff, err := startAll(ctx, heals, nil, ts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eff.Heal(ctx); err == nil || strings.Count(err.Error(), "stuck") != 3 || heals.healed != 3 {
		t.Errorf("heal: %v after %d heals", err, heals.healed)
	}
	one := &scripted{}
	if eff, err := startAll(ctx, one, nil, ts[:1]); err != nil || eff.Seen != "hit a" {
		t.Errorf("a set of one is the fault itself: %+v, %v", eff, err)
	}
}

// effectsFault starts with the effects given, one per call.
type effectsFault []*faults.Effect

func (e effectsFault) Start(_ context.Context, _ faults.Env, t faults.Target) (*faults.Effect, error) {
	return e[t.Name[0]-'a'], nil
}

// realFault builds a registered fault type with its default options.
func realFault(t *testing.T, typ string) faults.Fault {
	t.Helper()
	info, err := faults.Lookup(typ)
	if err != nil {
		t.Fatal(err)
	}
	f, err := info.New(func(any) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestRunFaultPauseEndedByAKill: a kill of the case ends the paused
// instance inside the pause's window; the pause's fault-end names it
// (by), and its heal is no failure (MODEL §10). Its premises, read from
// the record: the kill came once the pause was in force (it is started
// then), and was done before the pause's window ended; unmet (a machine
// that ran the kill late), the window is made longer.
func TestRunFaultPauseEndedByAKill(t *testing.T) {
	premise.Retry(t, []time.Duration{300 * time.Millisecond, 1500 * time.Millisecond, 6 * time.Second}, func(window time.Duration) string {
		tc := newTestCase(t, newFakeCluster("redis-1"))
		tc.r.log = &lockedWriter{w: tc.r.log} // two faults log at once
		tc.worker(t, 2, "redis-1")
		pause := fault("pause", realFault(t, "pause"), "instance-2")
		pause.For = window
		kill := fault("kill", realFault(t, "kill"), "instance-2")
		kill.At, kill.For = 0, 0
		paused := make(chan struct{})
		go func() {
			defer close(paused)
			tc.runFault(context.Background(), pause, 0, 0)
		}()
		if !tc.inForce(paused) {
			t.Fatalf("the pause never took effect: %+v", tc.faultRecords(t))
		}
		tc.runFault(context.Background(), kill, 1, 0)
		<-paused
		starts, ends := tc.faultMarks(t)
		if killed, healDue := ends["kill-1"].T, starts["pause-1"].T+int64(window); killed >= healDue {
			return fmt.Sprintf("the kill was done %s after the pause began, past its %s window", time.Duration(killed-starts["pause-1"].T), window)
		}
		end := ends["pause-1"]
		if end.Err != "" || end.By != "kill-1" || !strings.Contains(end.Observed, "killed by kill-1 while stopped") {
			t.Errorf("the pause's fault-end: %+v, want healed, by kill-1", end)
		}
		return ""
	})
}

// TestRunFaultPauseOfAProcessLost: the paused instance exits with no
// kill of the case (something outside the scenario killed it): the
// pause's heal failed, and its fault-end names no fault (A8). Its
// premise, as above: the process was killed while the pause was in
// force, before its window ended.
func TestRunFaultPauseOfAProcessLost(t *testing.T) {
	premise.Retry(t, []time.Duration{300 * time.Millisecond, 1500 * time.Millisecond, 6 * time.Second}, func(window time.Duration) string {
		tc := newTestCase(t, newFakeCluster("redis-1"))
		w := tc.worker(t, 2, "redis-1")
		pause := fault("pause", realFault(t, "pause"), "instance-2")
		pause.For = window
		paused := make(chan struct{})
		go func() {
			defer close(paused)
			tc.runFault(context.Background(), pause, 0, 0)
		}()
		if !tc.inForce(paused) {
			t.Fatalf("the pause never took effect: %+v", tc.faultRecords(t))
		}
		w.proc.Kill(5 * time.Second)
		killed := monoclock.Since(tc.r.base)
		<-paused
		starts, ends := tc.faultMarks(t)
		if healDue := starts["pause-1"].T + int64(window); killed >= healDue {
			return fmt.Sprintf("the process was gone %s after the pause began, past its %s window", time.Duration(killed-starts["pause-1"].T), window)
		}
		end := ends["pause-1"]
		if !strings.Contains(end.Err, "no kill of this case ended it") || end.By != "" {
			t.Errorf("the pause's fault-end: %+v, want a failed heal naming no fault", end)
		}
		if r := tc.faultRecords(t)[0]; r.HealError == "" || !tc.dirty.Load() {
			t.Errorf("record %+v, dirty %v: want the heal error recorded and the cluster dirty", r, tc.dirty.Load())
		}
		return ""
	})
}

// inForce waits until a fault of the case is in force (applied, its
// fault-start pushed) or the fault's run ended (done): whether it was.
func (tc *testCase) inForce(done <-chan struct{}) bool {
	for {
		if s, _ := tc.r.fault.Load().(string); s != "" {
			return true
		}
		select {
		case <-done:
			return false
		case <-time.After(time.Millisecond):
		}
	}
}

// faultMarks reads the fault-start and fault-end marks the history
// holds, by fault.
func (tc *testCase) faultMarks(t *testing.T) (starts, ends map[string]history.Event) {
	t.Helper()
	if err := tc.r.m.flush(true); err != nil {
		t.Fatal(err)
	}
	starts, ends = map[string]history.Event{}, map[string]history.Event{}
	rd := history.NewReader(bytes.NewReader(tc.history.Bytes()), "history")
	for rd.Next() {
		switch e := rd.Event(); e.F {
		case history.MarkFaultStart:
			starts[e.Fault] = *e
		case history.MarkFaultEnd:
			ends[e.Fault] = *e
		}
	}
	if rd.Err() != nil {
		t.Fatal(rd.Err())
	}
	return starts, ends
}

// lockedWriter serializes writes to w.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
