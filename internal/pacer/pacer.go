// Package pacer schedules open-loop load: attempts start at a target rate
// whatever happened to the earlier ones, so a slow lock shows as latency
// (measured from each attempt's intended start) and as dropped attempts,
// never as a quietly lower rate (coordinated omission). A Pacer is a pure
// function of time, as vegeta's is, so it is tested without sleeping.
package pacer

import (
	"fmt"
	"math"
	"time"
)

// A Pacer defines the rate of attempts over a run.
type Pacer interface {
	// Pace returns how long to wait, at elapsed, before attempt number
	// hits (0-based) is due (0 when it is already due or late), and stop
	// when the schedule has no such attempt.
	Pace(elapsed time.Duration, hits uint64) (wait time.Duration, stop bool)
	// Due returns when attempt number hits is due, and false when the
	// schedule has no such attempt.
	Due(hits uint64) (time.Duration, bool)
	// Rate is the target rate, per second, at elapsed.
	Rate(elapsed time.Duration) float64
}

// pace implements Pace from Due.
func pace(p Pacer, elapsed time.Duration, hits uint64) (time.Duration, bool) {
	due, ok := p.Due(hits)
	if !ok {
		return 0, true
	}
	if due <= elapsed {
		return 0, false
	}
	return due - elapsed, false
}

// Constant is Freq attempts per second for Duration.
type Constant struct {
	Freq     float64
	Duration time.Duration
}

func (c Constant) Due(hits uint64) (time.Duration, bool) {
	if c.Freq <= 0 {
		return 0, false
	}
	d := time.Duration(float64(hits) / c.Freq * float64(time.Second))
	return d, d < c.Duration
}

func (c Constant) Pace(elapsed time.Duration, hits uint64) (time.Duration, bool) {
	return pace(c, elapsed, hits)
}

func (c Constant) Rate(time.Duration) float64 { return c.Freq }

// Ramp goes linearly from From to To attempts per second over Duration.
type Ramp struct {
	From, To float64
	Duration time.Duration
}

// Due inverts the number of attempts due by t, From·t + (To−From)·t²/(2D),
// for the t at which it reaches hits.
func (r Ramp) Due(hits uint64) (time.Duration, bool) {
	D := r.Duration.Seconds()
	if D <= 0 {
		return 0, false
	}
	a := (r.To - r.From) / (2 * D)
	b := r.From
	n := float64(hits)
	var t float64
	switch {
	case math.Abs(a) < 1e-12:
		if b <= 0 {
			return 0, false
		}
		t = n / b
	default:
		disc := b*b + 4*a*n
		if disc < 0 {
			return 0, false // a falling ramp that never reaches hits
		}
		t = (-b + math.Sqrt(disc)) / (2 * a)
	}
	if t < 0 || math.IsNaN(t) {
		return 0, false
	}
	d := time.Duration(t * float64(time.Second))
	return d, d < r.Duration
}

func (r Ramp) Pace(elapsed time.Duration, hits uint64) (time.Duration, bool) {
	return pace(r, elapsed, hits)
}

func (r Ramp) Rate(elapsed time.Duration) float64 {
	if r.Duration <= 0 {
		return r.From
	}
	f := float64(elapsed) / float64(r.Duration)
	if f > 1 {
		f = 1
	}
	return r.From + (r.To-r.From)*f
}

// Step is Freq attempts per second for For.
type Step struct {
	Freq float64
	For  time.Duration
}

// Steps runs each step in turn.
type Steps []Step

func (s Steps) Due(hits uint64) (time.Duration, bool) {
	var start time.Duration
	var before float64 // attempts due before this step
	n := float64(hits)
	for _, st := range s {
		in := st.Freq * st.For.Seconds()
		if st.Freq > 0 && n < before+in {
			return start + time.Duration((n-before)/st.Freq*float64(time.Second)), true
		}
		before += in
		start += st.For
	}
	return 0, false
}

func (s Steps) Pace(elapsed time.Duration, hits uint64) (time.Duration, bool) {
	return pace(s, elapsed, hits)
}

func (s Steps) Rate(elapsed time.Duration) float64 {
	var start time.Duration
	for _, st := range s {
		if elapsed < start+st.For {
			return st.Freq
		}
		start += st.For
	}
	return 0
}

// Scaled divides a pacer's rate among n instances: each runs the pacer
// with every n-th attempt, offset by its index, so together they keep the
// whole schedule.
type Scaled struct {
	P     Pacer
	N, Of uint64 // this instance is N of Of (0-based)
}

func (s Scaled) Due(hits uint64) (time.Duration, bool) { return s.P.Due(hits*s.Of + s.N) }

func (s Scaled) Pace(elapsed time.Duration, hits uint64) (time.Duration, bool) {
	return pace(s, elapsed, hits)
}

func (s Scaled) Rate(elapsed time.Duration) float64 { return s.P.Rate(elapsed) / float64(s.Of) }

// Validate says what is wrong with a pacer's parameters, or nil.
func Validate(p Pacer) error {
	switch p := p.(type) {
	case Constant:
		if p.Freq <= 0 {
			return fmt.Errorf("rate must be positive, got %v", p.Freq)
		}
	case Ramp:
		if p.From < 0 || p.To < 0 || p.From+p.To == 0 {
			return fmt.Errorf("a ramp needs from, to >= 0, not both 0, got %v..%v", p.From, p.To)
		}
	case Steps:
		if len(p) == 0 {
			return fmt.Errorf("steps: none given")
		}
		for i, st := range p {
			if st.Freq < 0 || st.For <= 0 {
				return fmt.Errorf("steps[%d]: need per_second >= 0 and a positive for", i)
			}
		}
	}
	return nil
}

// Continue returns p followed, after its schedule ends at end, by attempts
// at the rate p had when it ended, for as long as the caller asks. The
// runner may run a case past its duration to watch a recovery (a fault
// healed late); an open-loop workload must go on offering load then, as a
// closed-loop one goes on cycling, or the recovery would be watched with
// no attempts to see it by. A schedule that ends at rate 0 stays over.
func Continue(p Pacer, end time.Duration) Pacer {
	// n is the number of attempts in p: the first hits it has no due for.
	hi := uint64(1)
	for _, ok := p.Due(hi); ok; _, ok = p.Due(hi) {
		if hi > math.MaxUint64/4 {
			return p
		}
		hi *= 2
	}
	lo := uint64(0) // p.Due(lo) may or may not exist; p.Due(hi) does not
	if _, ok := p.Due(0); !ok {
		hi = 0
	}
	for lo+1 < hi {
		mid := lo + (hi-lo)/2
		if _, ok := p.Due(mid); ok {
			lo = mid
		} else {
			hi = mid
		}
	}
	return continued{p: p, n: hi, end: end, freq: p.Rate(end - 1)}
}

type continued struct {
	p    Pacer
	n    uint64 // attempts in p
	end  time.Duration
	freq float64
}

func (c continued) Due(hits uint64) (time.Duration, bool) {
	if hits < c.n {
		return c.p.Due(hits)
	}
	if c.freq <= 0 {
		return 0, false
	}
	return c.end + time.Duration(float64(hits-c.n)/c.freq*float64(time.Second)), true
}

func (c continued) Pace(elapsed time.Duration, hits uint64) (time.Duration, bool) {
	return pace(c, elapsed, hits)
}

func (c continued) Rate(elapsed time.Duration) float64 {
	if elapsed < c.end {
		return c.p.Rate(elapsed)
	}
	return c.freq
}
