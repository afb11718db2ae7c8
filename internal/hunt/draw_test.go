package hunt

import (
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"
)

func testSpace() Space {
	return Space{
		Kinds:     []Weighted{{"pause", 4}, {"kill", 2}, {"cpu-starve", 2}},
		Targets:   []Weighted{{"holder", 5}, {"a-waiter", 2}, {"instance-1", 2}},
		Windows:   DefaultWindows,
		MaxFaults: 2,
		Lease:     2 * time.Second,
		Warmup:    500 * time.Millisecond,
	}
}

func TestDrawIsSeededAndKeepsItsRules(t *testing.T) {
	s := testSpace()
	a, b := rand.New(rand.NewPCG(7, 1)), rand.New(rand.NewPCG(7, 1))
	counts := map[int]int{}
	for i := 0; i < 2000; i++ {
		fa, fb := s.Draw(a), s.Draw(b)
		if !reflect.DeepEqual(fa, fb) {
			t.Fatalf("draw %d: one seed gave two schedules: %v and %v", i, fa, fb)
		}
		counts[len(fa)]++
		killed := false
		for j, f := range fa {
			if f.At < s.Warmup {
				t.Errorf("draw %d: %s starts before the warm-up", i, f)
			}
			x := float64(f.For) / float64(s.Lease)
			if !contains(s.Windows, x) {
				t.Errorf("draw %d: window %s is %g leases, not one of %v", i, f.For, x, s.Windows)
			}
			if killed && strings.HasPrefix(f.Target, "instance-") {
				t.Errorf("draw %d: %s aims at an instance after a kill", i, f)
			}
			killed = killed || f.Type == "kill"
			for _, g := range fa[:j] {
				if claim(f.Type) == claim(g.Type) && f.At < g.End() && g.At < f.End() {
					t.Errorf("draw %d: %s and %s both take its %s over at once", i, g, f, claim(f.Type))
				}
			}
		}
	}
	if counts[1] == 0 || counts[2] == 0 || counts[3] != 0 {
		t.Errorf("faults a trial: %v; want 1 and 2, never 3", counts)
	}
}

func contains(fs []float64, x float64) bool {
	for _, f := range fs {
		if f == x {
			return true
		}
	}
	return false
}

func TestPickFollowsWeights(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	ws := []Weighted{{"a", 3}, {"b", 1}}
	n := map[string]int{}
	for i := 0; i < 4000; i++ {
		n[pick(rng, ws)]++
	}
	if n["a"] < 2800 || n["a"] > 3200 {
		t.Errorf("a drawn %d times of 4000; want about 3000", n["a"])
	}
}

func TestSpaceValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*Space)
		want string
	}{
		{"ok", func(*Space) {}, ""},
		{"no kinds", func(s *Space) { s.Kinds = nil }, "no fault kind"},
		{"bad window", func(s *Space) { s.Windows = []float64{0} }, "not positive"},
		{"no lease", func(s *Space) { s.Lease = 0 }, "no lease"},
		{"no faults", func(s *Space) { s.MaxFaults = 0 }, "max faults"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := testSpace()
			tc.edit(&s)
			err := s.Validate()
			if (err == nil) != (tc.want == "") || (err != nil && !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("Validate() = %v; want %q", err, tc.want)
			}
		})
	}
}

func TestLengthHoldsEveryFaultAndTheTail(t *testing.T) {
	for _, tc := range []struct {
		trials [][]Fault
		lease  time.Duration
		want   time.Duration
	}{
		{nil, time.Second, 2500 * time.Millisecond},
		{[][]Fault{{{At: time.Second, For: 2 * time.Second}}, {{At: 500 * time.Millisecond, For: 4 * time.Second}}}, 2 * time.Second, 7 * time.Second},
		{[][]Fault{{{At: time.Second, For: time.Minute}}}, time.Minute, 81 * time.Second},
	} {
		if got := Length(tc.trials, tc.lease); got != tc.want {
			t.Errorf("Length(%v, %s) = %s; want %s", tc.trials, tc.lease, got, tc.want)
		}
	}
}
