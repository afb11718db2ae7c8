package checker_test

import (
	"strings"
	"testing"
	"time"

	"github.com/lockbench/lockbench/checker"
	"github.com/lockbench/lockbench/history"
)

// sharedLockCase is the shape of one lock object shared by two clients
// (MODEL §6, §13): a's lease (300 ms) runs out while it works, b takes the
// key, a releases late. With one token for both (redis-py's asyncio Lock
// shared by two tasks) a's release deletes b's key and is answered ok; b's
// own release then finds no token and is never sent. With a token each
// (the sync Lock shared by threads) both late releases are refused.
func sharedLockCase(t *testing.T, shared bool, exp history.Expectation) checker.Result {
	t.Helper()
	ms := int64(time.Millisecond)
	c := checker.NewCase(history.CaseMeta{Name: "shared", Duration: 1000 * ms, LeaseNs: 300 * ms, Expect: exp}, 0, checker.WithLinearizability(time.Second))
	add := func(at int64, typ history.Type, f, proc string) {
		c.Add(&history.Event{T: at * ms, Type: typ, F: f, Proc: proc, Key: "k"})
	}
	add(0, history.Invoke, history.OpAcquire, "i1c0")
	add(1, history.OK, history.OpAcquire, "i1c0")
	add(2, history.Invoke, history.OpAcquire, "i1c1")
	add(305, history.OK, history.OpAcquire, "i1c1")
	add(451, history.Invoke, history.OpRelease, "i1c0")
	if shared {
		add(452, history.OK, history.OpRelease, "i1c0")
		add(756, history.Invoke, history.OpRelease, "i1c1")
		add(756, history.Unsent, history.OpRelease, "i1c1")
	} else {
		add(452, history.Fail, history.OpRelease, "i1c0")
		add(756, history.Invoke, history.OpRelease, "i1c1")
		add(757, history.Fail, history.OpRelease, "i1c1")
	}
	c.Add(&history.Event{T: 1000 * ms, Type: history.Mark, F: history.MarkCaseStop})
	c.Add(&history.Event{T: 1000 * ms, Type: history.Mark, F: history.MarkCaseEnd})
	return c.Result()
}

func TestLateReleasesTellAClientBugFromItsControl(t *testing.T) {
	yes, no := true, false
	bug := history.Expectation{Violations: &yes, LateReleasesAccepted: &yes, Linearizable: &no}
	control := history.Expectation{Violations: &yes, LateReleasesAccepted: &no, Linearizable: &yes, MaxOverlapNs: int64(200 * time.Millisecond)}
	for _, tc := range []struct {
		name   string
		shared bool
		exp    history.Expectation
		status checker.Status
		unmet  string
	}{
		{"the bug as expected", true, bug, checker.StatusOK, ""},
		{"the control as expected", false, control, checker.StatusOK, ""},
		{"the bug held to the control", true, control, checker.StatusViolation, "late releases accepted: 1 of 2"},
		{"the control held to the bug", false, bug, checker.StatusNotReproduced, "expected a late release to be accepted, none of 2 was"},
		{"an overlap longer than the bound", false, history.Expectation{Violations: &yes, MaxOverlapNs: int64(100 * time.Millisecond)}, checker.StatusViolation, "overlapped for 146ms, longer than max_overlap 100ms"},
		{"the overlap left to any", true, history.Expectation{Any: []string{"violations"}, MaxOverlapNs: int64(146 * time.Millisecond)}, checker.StatusOK, ""},
		{"late extensions asked, none sent", true, history.Expectation{Violations: &yes, LateExtensionsAccepted: &no}, checker.StatusInvalid, "no extension was late"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := sharedLockCase(t, tc.shared, tc.exp)
			if r.Status != tc.status {
				t.Fatalf("status %s, want %s (unmet %q, invalid %q)", r.Status, tc.status, r.Unmet, r.Invalid)
			}
			if all := strings.Join(append(r.Unmet, r.Invalid...), "; "); !strings.Contains(all, tc.unmet) {
				t.Errorf("unmet and invalid %q, want one saying %q", all, tc.unmet)
			}
			want := checker.Late{Releases: 2, ReleasesRefused: 2}
			if tc.shared {
				want = checker.Late{Releases: 2, ReleasesAccepted: 1}
			}
			if r.Late != want {
				t.Errorf("late %+v, want %+v", r.Late, want)
			}
		})
	}
}

// TestLateNeedsTheGrantCertainlyGone: a release sent within the lease, or
// one at the very instant another's grant returned (a tie decides
// nothing, MODEL §2), is not late; an extension after a refused one is.
func TestLateNeedsTheGrantCertainlyGone(t *testing.T) {
	ms := int64(time.Millisecond)
	for _, tc := range []struct {
		name string
		ev   []history.Event
		want checker.Late
	}{
		{"within the lease", []history.Event{
			{T: 0, Type: history.Invoke, F: history.OpAcquire, Proc: "i1c0"}, {T: 1, Type: history.OK, F: history.OpAcquire, Proc: "i1c0"},
			{T: 250, Type: history.Invoke, F: history.OpRelease, Proc: "i1c0"}, {T: 251, Type: history.OK, F: history.OpRelease, Proc: "i1c0"},
		}, checker.Late{}},
		{"an ok extension moves the lease", []history.Event{
			{T: 0, Type: history.Invoke, F: history.OpAcquire, Proc: "i1c0"}, {T: 1, Type: history.OK, F: history.OpAcquire, Proc: "i1c0"},
			{T: 200, Type: history.Invoke, F: history.OpExtend, Proc: "i1c0"}, {T: 210, Type: history.OK, F: history.OpExtend, Proc: "i1c0"},
			{T: 450, Type: history.Invoke, F: history.OpRelease, Proc: "i1c0"}, {T: 451, Type: history.OK, F: history.OpRelease, Proc: "i1c0"},
		}, checker.Late{}},
		{"another's grant at the same instant", []history.Event{
			{T: 0, Type: history.Invoke, F: history.OpAcquire, Proc: "i1c0"}, {T: 1, Type: history.OK, F: history.OpAcquire, Proc: "i1c0"},
			{T: 5, Type: history.Invoke, F: history.OpAcquire, Proc: "i1c1"}, {T: 100, Type: history.OK, F: history.OpAcquire, Proc: "i1c1"},
			{T: 100, Type: history.Invoke, F: history.OpRelease, Proc: "i1c0"}, {T: 101, Type: history.Fail, F: history.OpRelease, Proc: "i1c0"},
		}, checker.Late{}},
		{"after a refused extension", []history.Event{
			{T: 0, Type: history.Invoke, F: history.OpAcquire, Proc: "i1c0"}, {T: 1, Type: history.OK, F: history.OpAcquire, Proc: "i1c0"},
			{T: 100, Type: history.Invoke, F: history.OpExtend, Proc: "i1c0"}, {T: 101, Type: history.Fail, F: history.OpExtend, Proc: "i1c0"},
			{T: 150, Type: history.Invoke, F: history.OpExtend, Proc: "i1c0"}, {T: 151, Type: history.OK, F: history.OpExtend, Proc: "i1c0"},
			{T: 200, Type: history.Invoke, F: history.OpRelease, Proc: "i1c0"}, {T: 201, Type: history.Fail, F: history.OpRelease, Proc: "i1c0"},
		}, checker.Late{Releases: 1, ReleasesRefused: 1, Extends: 1, ExtendsAccepted: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := checker.NewCase(history.CaseMeta{Name: "late", Duration: 1000 * ms, LeaseNs: 300 * ms}, 0)
			for _, e := range tc.ev {
				e.T *= ms
				e.Key = "k"
				c.Add(&e)
			}
			c.Add(&history.Event{T: 1000 * ms, Type: history.Mark, F: history.MarkCaseStop})
			c.Add(&history.Event{T: 1000 * ms, Type: history.Mark, F: history.MarkCaseEnd})
			if r := c.Result(); r.Late != tc.want {
				t.Errorf("late %+v, want %+v", r.Late, tc.want)
			}
		})
	}
}
