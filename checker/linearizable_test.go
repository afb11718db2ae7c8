package checker_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/lockbench/lockbench/checker"
	"github.com/lockbench/lockbench/internal/history"
)

type step struct {
	t     int64
	typ   history.Type
	f     string
	proc  string
	token uint64
}

func linOf(steps []step) *checker.LinOps {
	l := checker.NewLinOps()
	for _, s := range steps {
		l.Add(&history.Event{T: s.t, Type: s.typ, F: s.f, Proc: s.proc, Key: "k", Token: s.token})
	}
	return l
}

const (
	inv  = history.Invoke
	ok   = history.OK
	fail = history.Fail
	info = history.Info
	acq  = history.OpAcquire
	rel  = history.OpRelease
	lost = history.OpLost
)

// TestLockModel checks the porcupine lock models on hand-made histories
// with known answers.
func TestLockModel(t *testing.T) {
	tests := []struct {
		name          string
		steps         []step
		plain, fenced checker.Verdict
	}{
		{"alternating holders", []step{{1, inv, acq, "a", 0}, {2, ok, acq, "a", 1}, {3, inv, rel, "a", 0}, {4, ok, rel, "a", 0},
			{5, inv, acq, "b", 0}, {6, ok, acq, "b", 2}, {7, inv, rel, "b", 0}, {8, ok, rel, "b", 0}}, checker.Ok, checker.Ok},
		{"two holders", []step{{1, inv, acq, "a", 0}, {2, ok, acq, "a", 1}, {3, inv, acq, "b", 0}, {4, ok, acq, "b", 2},
			{5, inv, rel, "a", 0}, {6, ok, rel, "a", 0}}, checker.Violation, checker.Violation},
		{"concurrent calls, one wins", []step{{1, inv, acq, "a", 0}, {2, inv, acq, "b", 0}, {3, fail, acq, "b", 0}, {4, ok, acq, "a", 1}},
			checker.Ok, checker.Ok},
		{"unknown acquire may not have happened", []step{{1, inv, acq, "a", 0}, {2, inv, acq, "b", 0}, {3, ok, acq, "b", 1},
			{4, info, acq, "a", 0}, {5, inv, rel, "b", 0}, {6, ok, rel, "b", 0}}, checker.Ok, checker.Ok},
		{"unknown acquire may have happened", []step{{1, inv, acq, "a", 0}, {2, info, acq, "a", 0}, {3, inv, acq, "b", 0},
			{4, fail, acq, "b", 0}}, checker.Ok, checker.Ok},
		{"lost lease frees the lock", []step{{1, inv, acq, "a", 0}, {2, ok, acq, "a", 1}, {3, ok, lost, "a", 0},
			{4, inv, acq, "b", 0}, {5, ok, acq, "b", 2}, {6, inv, rel, "a", 0}, {7, fail, rel, "a", 0}}, checker.Ok, checker.Ok},
		{"release by a non-holder accepted", []step{{1, inv, acq, "a", 0}, {2, ok, acq, "a", 1}, {3, inv, rel, "b", 0}, {4, ok, rel, "b", 0}},
			checker.Violation, checker.Violation},
		{"token goes backwards", []step{{1, inv, acq, "a", 0}, {2, ok, acq, "a", 5}, {3, inv, rel, "a", 0}, {4, ok, rel, "a", 0},
			{5, inv, acq, "b", 0}, {6, ok, acq, "b", 3}}, checker.Ok, checker.Violation},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := linOf(tt.steps).CheckLinearizable(true, 10*time.Second)
			if r.Verdict != tt.plain || r.Fenced != tt.fenced {
				t.Errorf("plain %s fenced %s, want %s %s", r.Verdict, r.Fenced, tt.plain, tt.fenced)
			}
			if r.Verdict == checker.Violation && len(r.Info) == 0 {
				t.Error("no linearization info kept for the visualization")
			}
		})
	}
}

// TestLinearizabilityAgreesWithMutualExclusion runs the porcupine check over
// the hand-made histories of testdata/ and expects it to agree with the
// mutual-exclusion verdict where both apply.
func TestLinearizabilityAgreesWithMutualExclusion(t *testing.T) {
	for _, name := range []string{"safe", "overlap", "three-holders", "unknown-acquire", "lost-lease", "crash"} {
		f, err := os.Open(filepath.Join("testdata", name+".jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		r := history.NewReader(f, name)
		l := checker.NewLinOps()
		var c *checker.Case
		for r.Next() {
			if r.Event().F == history.MarkCaseStart {
				m, _ := checker.MetaOf(r.Event())
				c = checker.NewCase(m)
				continue
			}
			l.Add(r.Event())
			c.Add(r.Event())
		}
		f.Close()
		lin := l.CheckLinearizable(false, 10*time.Second)
		me := c.Result().MutualExclusion
		if lin.Verdict != me {
			t.Errorf("%s: linearizability %s, mutual exclusion %s", name, lin.Verdict, me)
		}
	}
}
