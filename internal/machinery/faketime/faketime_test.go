package faketime

import (
	"math"
	"os"
	"strings"
	"testing"
)

// TestFakeClock: the faketime file's line round-trips, and a new rate
// leaves the fake time where it was at the switch (libfaketime's fake time
// is start + elapsed·rate + offset).
func TestFakeClock(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want Clock
	}{
		{"+0s", Clock{0, 1}}, {"+0", Clock{0, 1}}, {"-5s", Clock{-5, 1}},
		{"+0.25s x1.5", Clock{0.25, 1.5}}, {"-3s x0.5", Clock{-3, 0.5}},
	} {
		got, err := Parse(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("parse %q = %+v, %v; want %+v", tt.in, got, err, tt.want)
		}
		if !strings.Contains(got.String(), " x") {
			t.Errorf("%q: %q has no rate (libfaketime would keep the last one)", tt.in, got.String())
		}
		back, err := Parse(got.String())
		if err != nil || back != got {
			t.Errorf("%q: %q reads back as %+v, %v", tt.in, got.String(), back, err)
		}
	}
	for _, bad := range []string{"", "soon", "+1s 2", "+1s x0", "+1s x-1", "+1s x1.5 extra"} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	fake := func(fc Clock, elapsed float64) float64 { return elapsed*fc.Rate + fc.Offset }
	for _, fc := range []Clock{{0, 1}, {2, 1}, {-1, 1.5}, {0.5, 0.8}} {
		for _, rate := range []float64{1, 1.5, 0.5, 2} {
			const at = 37.25
			next := fc.WithRate(rate, at)
			if d := fake(next, at) - fake(fc, at); math.Abs(d) > 1e-9 {
				t.Errorf("%+v to x%g at %gs steps the clock by %gs", fc, rate, at, d)
			}
			if r := (fake(next, at+10) - fake(next, at)) / 10; math.Abs(r-rate) > 1e-9 {
				t.Errorf("%+v to x%g runs at x%g", fc, rate, r)
			}
		}
	}
	if age, err := ProcessAge(os.Getpid()); err != nil || age < 0 || age > 3600 {
		t.Errorf("this process's age: %g, %v", age, err)
	}
}
