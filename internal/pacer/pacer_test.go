package pacer

import (
	"testing"
	"time"
)

// TestPace is a table in vegeta's style: where the schedule is, how long
// to wait, whether to stop. No sleeping.
func TestPace(t *testing.T) {
	ms := time.Millisecond
	for _, tt := range []struct {
		name    string
		p       Pacer
		elapsed time.Duration
		hits    uint64
		wait    time.Duration
		stop    bool
	}{
		// 2 per second, 9 sent, 4.9s in: attempt 9 is due at 4.5s: now.
		{"constant behind", Constant{Freq: 2, Duration: 10 * time.Second}, 4900 * ms, 9, 0, false},
		// 2 per second, 10 sent, 4.9s in: attempt 10 is due at 5s.
		{"constant ahead", Constant{Freq: 2, Duration: 10 * time.Second}, 4900 * ms, 10, 100 * ms, false},
		{"constant first", Constant{Freq: 100, Duration: time.Second}, 0, 0, 0, false},
		{"constant done", Constant{Freq: 2, Duration: 5 * time.Second}, 4900 * ms, 10, 0, true},
		// Continued past its end (a case run on to watch a recovery): the
		// last rate goes on. 10 attempts in 5s, then 2/s: attempt 12 at 6s.
		{"continued constant", Continue(Constant{Freq: 2, Duration: 5 * time.Second}, 5*time.Second), 4900 * ms, 12, 1100 * ms, false},
		// A ramp from 0 to 10/s over 10s holds 50; then 10/s: attempt 60 at 11s.
		{"continued ramp", Continue(Ramp{From: 0, To: 10, Duration: 10 * time.Second}, 10*time.Second), 10 * time.Second, 60, time.Second, false},
		{"continued within", Continue(Constant{Freq: 2, Duration: 10 * time.Second}, 10*time.Second), 4900 * ms, 10, 100 * ms, false},
		// Steps that end at rate 0 stay over.
		{"continued stopped", Continue(Steps{{Freq: 2, For: time.Second}, {Freq: 0, For: time.Second}}, 2*time.Second), 2 * time.Second, 2, 0, true},
		// A ramp from 0 to 10/s over 10s has 0.5·t² due by t: attempt 8 at 4s.
		{"ramp up", Ramp{From: 0, To: 10, Duration: 10 * time.Second}, 3 * time.Second, 8, time.Second, false},
		{"ramp flat", Ramp{From: 5, To: 5, Duration: 10 * time.Second}, 0, 10, 2 * time.Second, false},
		// 10t − 0.5t² attempts due by t on a ramp down from 10/s: 18 by 2s.
		{"ramp down", Ramp{From: 10, To: 0, Duration: 10 * time.Second}, 0, 18, 2 * time.Second, false},
		{"ramp past its end", Ramp{From: 10, To: 0, Duration: 10 * time.Second}, 0, 60, 0, true},
		// 10/s for 1s, then 100/s for 1s: attempt 10 starts the second step.
		{"steps second", Steps{{10, time.Second}, {100, time.Second}}, 0, 10, time.Second, false},
		{"steps within", Steps{{10, time.Second}, {100, time.Second}}, time.Second, 15, 50 * ms, false},
		{"steps done", Steps{{10, time.Second}, {100, time.Second}}, 2 * time.Second, 110, 0, true},
		// Two instances share 10/s: instance 1 takes attempts 1, 3, 5...
		{"scaled", Scaled{P: Constant{Freq: 10, Duration: 10 * time.Second}, N: 1, Of: 2}, 0, 2, 500 * ms, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			wait, stop := tt.p.Pace(tt.elapsed, tt.hits)
			if stop != tt.stop || (!stop && absDiff(wait, tt.wait) > time.Microsecond) {
				t.Errorf("Pace(%s, %d) = %s, %v; want %s, %v", tt.elapsed, tt.hits, wait, stop, tt.wait, tt.stop)
			}
		})
	}
}

// TestScheduleKeepsItsCount: whatever the shape, the number of attempts
// due over the whole schedule is its integral.
func TestScheduleKeepsItsCount(t *testing.T) {
	for _, tt := range []struct {
		p    Pacer
		want uint64
	}{
		{Constant{Freq: 50, Duration: 4 * time.Second}, 200},
		{Ramp{From: 0, To: 100, Duration: 4 * time.Second}, 200},
		{Steps{{10, time.Second}, {100, 2 * time.Second}}, 210},
	} {
		var n uint64
		for {
			if _, ok := tt.p.Due(n); !ok {
				break
			}
			n++
		}
		if n < tt.want-1 || n > tt.want+1 {
			t.Errorf("%T: %d attempts due, want %d", tt.p, n, tt.want)
		}
	}
	// Split over three instances, the schedule keeps its count.
	var total uint64
	for i := uint64(0); i < 3; i++ {
		s := Scaled{P: Constant{Freq: 50, Duration: 4 * time.Second}, N: i, Of: 3}
		for n := uint64(0); ; n++ {
			if _, ok := s.Due(n); !ok {
				total += n
				break
			}
		}
	}
	if total != 200 {
		t.Errorf("three instances scheduled %d attempts, want 200", total)
	}
}

func TestRate(t *testing.T) {
	r := Ramp{From: 10, To: 30, Duration: 10 * time.Second}
	if got := r.Rate(5 * time.Second); got != 20 {
		t.Errorf("ramp rate at half way = %v, want 20", got)
	}
	s := Steps{{10, time.Second}, {100, time.Second}}
	if s.Rate(1500*time.Millisecond) != 100 || s.Rate(3*time.Second) != 0 {
		t.Errorf("steps rate")
	}
	if (Scaled{P: Constant{Freq: 90}, Of: 3}).Rate(0) != 30 {
		t.Errorf("scaled rate")
	}
}

func TestValidate(t *testing.T) {
	for _, p := range []Pacer{Constant{}, Ramp{}, Steps{}, Steps{{Freq: 1}}} {
		if Validate(p) == nil {
			t.Errorf("%#v accepted", p)
		}
	}
	if Validate(Constant{Freq: 1}) != nil {
		t.Error("a good pacer rejected")
	}
}

func absDiff(a, b time.Duration) time.Duration {
	if a > b {
		return a - b
	}
	return b - a
}
