package realized

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/lockbench/lockbench/checker"
	"github.com/lockbench/lockbench/history"
)

func TestPhasesAtEachFault(t *testing.T) {
	meta, _ := json.Marshal(history.CaseMeta{Name: "r.t1-2", Row: "r", Trial: 1, Trials: 2, Lanes: 2, LaneInstances: 2, Backend: "redis"})
	evs := []history.Event{
		{T: 10, Type: history.Mark, F: history.MarkCaseStart, Meta: meta},
		{T: 20, Type: history.Invoke, F: history.OpAcquire, Proc: "i1c1", Key: "k0"},
		{T: 21, Type: history.OK, F: history.OpAcquire, Proc: "i1c1", Key: "k0", Token: 1},
		{T: 22, Type: history.Invoke, F: history.OpAcquire, Proc: "i2c1", Key: "k0"},
		{T: 23, Type: history.Invoke, F: history.OpAcquire, Proc: "i3c1", Key: "k1"},
		{T: 30, Type: history.Mark, F: history.MarkFaultStart, Fault: "pause-1@l1", Target: "instance-2"},
		{T: 31, Type: history.Mark, F: history.MarkFaultStart, Fault: "kill-1", Target: "redis-1"},
		{T: 32, Type: history.Invoke, F: history.OpExtend, Proc: "i1c1", Key: "k0"},
		{T: 33, Type: history.Mark, F: history.MarkFaultStart, Fault: "pause-2@l1", Target: "instance-1"},
		{T: 34, Type: history.OK, F: history.OpExtend, Proc: "i1c1", Key: "k0"},
		{T: 35, Type: history.Invoke, F: history.OpRelease, Proc: "i1c1", Key: "k0"},
		{T: 36, Type: history.Mark, F: history.MarkFaultStart, Fault: "pause-3@l1", Target: "instance-1"},
		{T: 37, Type: history.OK, F: history.OpRelease, Proc: "i1c1", Key: "k0"},
		{T: 38, Type: history.Fail, F: history.OpAcquire, Proc: "i3c1", Key: "k1"},
		{T: 39, Type: history.Mark, F: history.MarkFaultStart, Fault: "pause-4@l1", Target: "instance-1"},
		{T: 40, Type: history.Mark, F: history.MarkFaultStart, Fault: "pause-5@l2", Target: "instance-3"},
	}
	p := filepath.Join(t.TempDir(), "history.jsonl")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	enc := json.NewEncoder(f)
	for _, e := range evs {
		if err := enc.Encode(e); err != nil {
			t.Fatal(err)
		}
	}
	f.Close()
	bs, err := readBatches(p)
	if err != nil {
		t.Fatalf("readBatches: %v", err)
	}
	if len(bs) != 1 || bs[0].start != 10 {
		t.Fatalf("batches %+v; want one starting at 10", bs)
	}
	want := map[string]map[int]string{
		"pause-1@l1": {1: PhaseWaiting, 2: PhaseIdle},    // instance-2 waits; lane 2 has no instance-2
		"kill-1":     {1: PhaseHolding, 2: PhaseWaiting}, // a server: every client of each lane
		"pause-2@l1": {1: PhaseExtending, 2: PhaseIdle},  // instance-1 extends
		"pause-3@l1": {1: PhaseReleasing, 2: PhaseIdle},  // instance-1 releases
		"pause-4@l1": {1: PhaseIdle, 2: PhaseIdle},       // released: thinking
		"pause-5@l2": {1: PhaseIdle, 2: PhaseIdle},       // instance-3 gave up waiting
	}
	for fault, lanes := range want {
		for l, ph := range lanes {
			if got := bs[0].phases[fault][l]; got != ph {
				t.Errorf("%s, lane %d: %q; want %q", fault, l, got, ph)
			}
		}
	}
}

func TestOutcomeClass(t *testing.T) {
	for _, tc := range []struct {
		o    Outcome
		want string
	}{
		{Outcome{Valid: true}, ClassClean},
		{Outcome{Valid: true, Violations: 3}, ClassTwoHolders},
		{Outcome{Valid: false, Violations: 3}, ClassTwoHolders}, // unsafe, however invalid
		{Outcome{Valid: true, Violations: 3, Damage: 1}, ClassDamage},
		{Outcome{Valid: true, NeverBack: true}, ClassNeverBack},
		{Outcome{Valid: false, NeverBack: true}, ClassInvalid},
	} {
		if got := tc.o.Class(); got != tc.want {
			t.Errorf("%+v: %s; want %s", tc.o, got, tc.want)
		}
	}
}

func TestFind(t *testing.T) {
	r := &Run{Trials: []Trial{
		{Case: "a.t1", Row: "a", Batch: "a.t1-3"},
		{Case: "a.t2", Row: "a", Batch: "a.t1-3", Outcome: Outcome{NeverBack: true}},
		{Case: "a.t3", Row: "a", Batch: "a.t1-3", Outcome: Outcome{Violations: 1}},
		{Case: "b", Row: "b", Batch: "b"},
	}}
	for name, want := range map[string]string{"a.t1": "a.t1", "a": "a.t3", "a.t1-3": "a.t3", "": "a.t3", "b": "b"} {
		got, err := r.Find(name)
		if err != nil || got.Case != want {
			t.Errorf("Find(%q) = %v, %v; want %s", name, got, err, want)
		}
	}
	if _, err := r.Find("c"); err == nil {
		t.Errorf("Find(c): no error")
	}
}

func TestNeverBackNeedsAWaiter(t *testing.T) {
	const lease = 2e9
	fault := func(next, clear float64) checker.FaultLiveness {
		return checker.FaultLiveness{NextGrantMs: next, ClearMs: clear}
	}
	for _, tc := range []struct {
		name string
		f    checker.FaultLiveness
		gap  float64
		want bool
	}{
		{"a waiter waited through the clear window", fault(-1, 9000), 9500, true},
		{"nobody was left to wait", fault(-1, 9000), 0, false},
		{"granted again", fault(1200, 9000), 9500, false},
		{"too short a window to tell", fault(-1, 1500), 9500, false},
		{"less than the checker needs", fault(-1, 1980), 9500, false}, // checker.MinEvidence: 2s
	} {
		r := checker.Result{Valid: true, Liveness: checker.Liveness{LongestGapMs: tc.gap, Faults: []checker.FaultLiveness{tc.f}}}
		if got := outcomeOf(r, lease).NeverBack; got != tc.want {
			t.Errorf("%s: never back %v; want %v", tc.name, got, tc.want)
		}
	}
}
