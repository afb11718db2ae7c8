package workload

import (
	"testing"
	"time"

	"github.com/lockbench/lockbench/internal/config"
)

// TestForInstance: an instance runs the base workload with the overrides
// that name it, the later winning; Longest looks at every instance.
func TestForInstance(t *testing.T) {
	ms := func(n int) config.Duration { return config.Duration(time.Duration(n) * time.Millisecond) }
	w := Default()
	w.Instances = 3
	w.Hold = Dist{Dist: "constant", Value: ms(10)}
	w.Overrides = []Override{
		{Instances: []int{1, 2}, Hold: &Dist{Dist: "constant", Value: ms(500)}, AcquireTimeout: ms(9000)},
		{Instances: []int{2}, Hold: &Dist{Dist: "constant", Value: ms(700)}},
	}
	for _, tt := range []struct {
		n       int
		hold    time.Duration
		timeout time.Duration
	}{
		{1, 500 * time.Millisecond, 9 * time.Second},
		{2, 700 * time.Millisecond, 9 * time.Second},
		{3, 10 * time.Millisecond, w.AcquireTimeout.D()},
	} {
		got := w.ForInstance(tt.n)
		if got.Hold.Value.D() != tt.hold || got.AcquireTimeout.D() != tt.timeout || got.Overrides != nil {
			t.Errorf("instance %d: hold %s, acquire timeout %s, %d overrides left; want %s, %s, none", tt.n, got.Hold.Value, got.AcquireTimeout, len(got.Overrides), tt.hold, tt.timeout)
		}
	}
	if l := w.Longest(func(w Workload) time.Duration { return w.Hold.Upper() }); l != 700*time.Millisecond {
		t.Errorf("Longest hold %s, want 700ms", l)
	}
}

// TestKeyNames: keys are written by Key and read back by ParseKey, and
// nothing else parses as one.
func TestKeyNames(t *testing.T) {
	for _, n := range []int{0, 1, 9, 10, 12345} {
		if got, ok := ParseKey(Key(n)); !ok || got != n {
			t.Errorf("ParseKey(Key(%d)) = %d, %v", n, got, ok)
		}
	}
	for _, s := range []string{"", "k", "k-1", "k+1", "k01", "kx", "3", "K3", "k3 "} {
		if n, ok := ParseKey(s); ok {
			t.Errorf("ParseKey(%q) = %d, want no key", s, n)
		}
	}
}
