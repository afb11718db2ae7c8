package monoclock

import (
	"testing"
	"time"
)

// TestNowFollowsTheSystemClock: the cheap reading stays within a few
// microseconds of CLOCK_MONOTONIC read by a system call, so timestamps of
// different processes compare.
func TestNowFollowsTheSystemClock(t *testing.T) {
	if Uncertainty > 50*time.Microsecond {
		t.Errorf("calibrated within %s", Uncertainty)
	}
	for i := 0; i < 5; i++ {
		time.Sleep(20 * time.Millisecond)
		a := raw()
		n := Now()
		b := raw()
		if n < a-int64(10*time.Microsecond) || n > b+int64(10*time.Microsecond) {
			t.Fatalf("Now %d outside [%d, %d]", n, a, b)
		}
	}
}

func BenchmarkNow(b *testing.B) {
	for i := 0; i < b.N; i++ {
		Now()
	}
}

func BenchmarkRaw(b *testing.B) {
	for i := 0; i < b.N; i++ {
		raw()
	}
}
