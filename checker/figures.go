package checker

import (
	"encoding/json"
	"math"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/lockbench/lockbench/history"
)

// This file follows MODEL §15: the figures of a case beyond its counts —
// acquire latency, hand-off latency, hold time, throughput, phases. They
// are computed here, from the same events and the same holds and waits as
// the verdicts, so that an acquisition the model discards (a posthumous
// ok) is no latency sample either.

// Figures are a case's figures of MODEL §15.
type Figures struct {
	// DurationS runs from the case's start to its stop (to its end, or
	// the last event, without a stop mark).
	DurationS float64
	// AcquiresPerSec counts the ok acquires that returned before the stop.
	AcquiresPerSec float64
	// AcquireLatency has one sample per ok acquire counted (from its
	// invoke, or from when it was due in open loop); Handoff one per
	// hand-off (a release that ended a hold while another live client
	// waited, to the next grant to another live client, unless that grant
	// went back to the releaser: a barge, no sample); HoldTime one per
	// hold ended by a release.
	AcquireLatency, Handoff, HoldTime Percentiles
	// HandoffBarges counts the hand-offs the releaser ended itself, taking
	// the key straight back: no Handoff sample (MODEL §15).
	HandoffBarges int
	// Releases and Extensions count ok ones; ExtensionsFailed refused,
	// unsent or unknown extensions; Dropped open-loop attempts that could not start
	// on time, OfferedPerSec the attempts the schedule made per second.
	Releases, Extensions, ExtensionsFailed, Dropped int
	OfferedPerSec                                   float64
	// Phases split the case before, during and after each fault window.
	Phases []Phase
	// AcquiresDuringFaults and AcquiresAfterFaults count each ok acquire
	// once: while some fault was in force, or after the first fault
	// began with none in force.
	AcquiresDuringFaults, AcquiresAfterFaults int

	acqHist *hdrhistogram.Histogram
}

// AcquireHistogram is the acquire latencies' HDR histogram (µs), for
// plots; nil for a zero Figures.
func (f Figures) AcquireHistogram() *hdrhistogram.Histogram { return f.acqHist }

// Percentiles of a latency in milliseconds (MODEL §15). The percentiles
// come from an HDR histogram of microseconds (3 significant digits): the
// top of the bucket holding the sample of rank ⌈q·n/100⌉. Min and Max are
// the recorded values themselves, never a bucket edge. With no sample
// (Count 0) a latency has no value: every other field is absent, never 0.
type Percentiles struct {
	Count int64   `json:"count"`
	Mean  float64 `json:"mean_ms"`
	Min   float64 `json:"min_ms"`
	P50   float64 `json:"p50_ms"`
	P90   float64 `json:"p90_ms"`
	P99   float64 `json:"p99_ms"`
	P999  float64 `json:"p999_ms"`
	Max   float64 `json:"max_ms"`
}

// MarshalJSON writes a latency with no sample as its count alone.
func (p Percentiles) MarshalJSON() ([]byte, error) {
	if p.Count == 0 {
		return []byte(`{"count":0}`), nil
	}
	type plain Percentiles
	return json.Marshal(plain(p))
}

// PhaseStats are the figures of one stretch of a case (MODEL §15).
type PhaseStats struct {
	DurationS       float64 `json:"duration_s"`
	Acquisitions    int     `json:"acquisitions"`
	AcquiresPerSec  float64 `json:"acquisitions_per_s"`
	AcquiresFailed  int     `json:"acquires_failed"`
	AcquiresUnknown int     `json:"acquires_unknown"`
	AcquiresUnsent  int     `json:"acquires_unsent,omitempty"`
	// P50, P99 and Max are the latencies of the acquires that completed
	// in the phase; nil (absent) with none: no sample is no value, while
	// 0 is a value (an answer within the microsecond).
	P50        *float64 `json:"p50_ms,omitempty"`
	P99        *float64 `json:"p99_ms,omitempty"`
	Max        *float64 `json:"max_ms,omitempty"`
	Violations int      `json:"violations"`
}

// Phase splits a case around one fault window: before it (since the case
// start or the previous window's end), during it, and after it (until the
// next window or the case end), so a reader sees what the fault did.
type Phase struct {
	Fault  string     `json:"fault"`
	Target string     `json:"target"`
	Before PhaseStats `json:"before"`
	During PhaseStats `json:"during"`
	After  PhaseStats `json:"after"`
}

// Histogram bounds: 1 µs to 10 min, 3 significant digits. Values are µs.
const (
	histMin = 1
	histMax = 600_000_000
	histSig = 3
)

// recorder is one latency's samples: an HDR histogram and the exact
// extremes.
type recorder struct {
	h        *hdrhistogram.Histogram
	n        int64
	min, max int64
}

func newRecorder() *recorder { return &recorder{h: hdrhistogram.New(histMin, histMax, histSig)} }

func (r *recorder) add(ns int64) {
	if r.n == 0 || ns < r.min {
		r.min = ns
	}
	if r.n == 0 || ns > r.max {
		r.max = ns
	}
	r.n++
	_ = r.h.RecordValue(micros(ns)) // clamped to the range: cannot fail
}

func micros(ns int64) int64 { return min(max(ns/1000, histMin), histMax) }

func (r *recorder) merge(o *recorder) {
	if o.n == 0 {
		return
	}
	r.h.Merge(o.h)
	if r.n == 0 || o.min < r.min {
		r.min = o.min
	}
	if r.n == 0 || o.max > r.max {
		r.max = o.max
	}
	r.n += o.n
}

func (r *recorder) percentiles() Percentiles {
	if r.n == 0 {
		return Percentiles{}
	}
	lo, hi := math.Round(float64(r.min))/1e6, math.Round(float64(r.max))/1e6
	// MODEL §15: p_q is the sample of rank ⌈q·n/100⌉, as the histogram
	// reports it, and never outside the recorded extremes (an HDR bucket's
	// top can pass the largest sample).
	q := func(pct float64) float64 {
		v := r.h.ValueAtQuantile(rankQuantile(pct, r.n))
		return min(max(math.Round(float64(v))/1e3, lo), hi)
	}
	return Percentiles{
		Count: r.n,
		Mean:  min(max(math.Round(r.h.Mean())/1e3, lo), hi),
		Min:   lo,
		P50:   q(50),
		P90:   q(90),
		P99:   q(99),
		P999:  q(99.9),
		Max:   hi,
	}
}

// rankQuantile is the quantile to ask an HDR histogram of n samples for
// the sample of rank ⌈pct·n/100⌉: the histogram counts to ⌊q·n/100 + ½⌋,
// its own nearest rank, which for a tail percentile is one sample short.
func rankQuantile(pct float64, n int64) float64 {
	rank := max(1, int64(math.Ceil(pct*float64(n)/100-1e-9)))
	return 100 * (float64(rank) - 0.25) / float64(n)
}

// segment is the stretch of a case between two fault marks.
type segment struct {
	start, end                               int64
	acq, failed, unknown, unsent, violations int
	lat                                      *recorder
}

// window is a fault's window: its times, and the segments its marks
// began (endSeg -1: never healed).
type window struct {
	fault, target    string
	start, end       int64 // end -1: never healed
	startSeg, endSeg int
}

// figures gathers MODEL §15's figures as the case is judged.
type figures struct {
	start, stopT   int64
	stopped        bool
	acq, hand, hol *recorder
	barges         int // hand-offs ended by the releaser's own grant
	okBeforeStop   int
	releases, ext  int
	extFailed      int
	dropped, offer int
	segs           []*segment
	wins           []window
	// inForce counts the faults in force; acqDuring and acqAfter count
	// each ok acquire once, during some fault or after them (MODEL §15).
	inForce             int
	acqDuring, acqAfter int
}

func (f *figures) init(start int64) {
	f.start = start
	f.acq, f.hand, f.hol = newRecorder(), newRecorder(), newRecorder()
	f.segs = []*segment{{start: start, lat: newRecorder()}}
}

func (f *figures) seg() *segment { return f.segs[len(f.segs)-1] }

func (f *figures) caseStop(t int64) { f.stopped, f.stopT = true, t }

// faultMark begins a new segment at a fault's start or end.
func (f *figures) faultMark(t int64) {
	f.seg().end = t
	f.segs = append(f.segs, &segment{start: t, lat: newRecorder()})
}

func (f *figures) faultStart(name, target string, t int64) {
	f.wins = append(f.wins, window{fault: name, target: target, start: t, end: -1, startSeg: len(f.segs) - 1, endSeg: -1})
	f.inForce++
}

func (f *figures) faultEnd(name string, t int64) {
	for i := len(f.wins) - 1; i >= 0; i-- {
		if f.wins[i].fault == name && f.wins[i].end < 0 {
			f.wins[i].end, f.wins[i].endSeg = t, len(f.segs)-1
			f.inForce--
			return
		}
	}
}

// completed records an acquire counted by MODEL §3 that completed with
// typ after lat: a latency sample whatever its outcome (MODEL §15), an
// acquisition when it is ok.
func (f *figures) completed(typ history.Type, lat int64) {
	f.acq.add(lat)
	s := f.seg()
	s.lat.add(lat)
	switch typ {
	case history.OK:
		s.acq++
		if !f.stopped {
			f.okBeforeStop++
		}
		if f.inForce > 0 {
			f.acqDuring++
		} else if len(f.wins) > 0 {
			f.acqAfter++
		}
	case history.Fail:
		s.failed++
	case history.Unsent:
		s.unsent++
	default:
		s.unknown++
	}
}

// abandoned records an acquire left in flight by a death or the end: an
// unknown outcome with no completion, so no latency sample.
func (f *figures) abandoned() { f.seg().unknown++ }

func (f *figures) extended(t history.Type) {
	if t == history.OK {
		f.ext++
	} else {
		f.extFailed++
	}
}

// result finishes the figures; end is where the case (or its history)
// ended.
func (f *figures) result(end int64) Figures {
	f.seg().end = end
	stop := end
	if f.stopped {
		stop = f.stopT
	}
	out := Figures{
		DurationS:        float64(stop-f.start) / 1e9,
		AcquireLatency:   f.acq.percentiles(),
		Handoff:          f.hand.percentiles(),
		HandoffBarges:    f.barges,
		HoldTime:         f.hol.percentiles(),
		Releases:         f.releases,
		Extensions:       f.ext,
		ExtensionsFailed: f.extFailed,
		Dropped:          f.dropped,

		AcquiresDuringFaults: f.acqDuring,
		AcquiresAfterFaults:  f.acqAfter,
		acqHist:              f.acq.h,
	}
	if out.DurationS > 0 {
		out.AcquiresPerSec = float64(f.okBeforeStop) / out.DurationS
		out.OfferedPerSec = float64(f.offer) / out.DurationS
	}
	out.Phases = f.phases(end)
	return out
}

// phases computes the phases of every fault window, in order of their
// starts (MODEL §15). A phase is the events from one boundary mark
// (included) to the next (excluded), in the record's order: the segments
// between them, so an instant two phases share (a mark at the same time
// as an acquire's answer, a case cut short at a fault's mark) puts each
// acquire in one of them, the one the record's order gives.
func (f *figures) phases(end int64) []Phase {
	last := len(f.segs)
	stats := func(a, b int64, from, to int) PhaseStats {
		var ps PhaseStats
		lat := newRecorder()
		for _, s := range f.segs[from:max(from, to)] {
			ps.Acquisitions += s.acq
			ps.AcquiresFailed += s.failed
			ps.AcquiresUnknown += s.unknown
			ps.AcquiresUnsent += s.unsent
			ps.Violations += s.violations
			lat.merge(s.lat)
		}
		ps.DurationS = float64(b-a) / 1e9
		if ps.DurationS > 0 {
			ps.AcquiresPerSec = float64(ps.Acquisitions) / ps.DurationS
		}
		if p := lat.percentiles(); p.Count > 0 {
			ps.P50, ps.P99, ps.Max = &p.P50, &p.P99, &p.Max
		}
		return ps
	}
	var out []Phase
	for i, w := range f.wins {
		wend, wendSeg := w.end, w.endSeg
		if wend < 0 {
			wend, wendSeg = end, last
		}
		// before: from the previous window's end (the case's end when it
		// never healed: then this one's before is empty), or the start
		before, beforeSeg := f.start, 0
		if i > 0 {
			p := f.wins[i-1]
			before, beforeSeg = p.end, p.endSeg
			if before < 0 {
				before, beforeSeg = end, last
			}
		}
		after, afterSeg := end, last
		if i+1 < len(f.wins) {
			after, afterSeg = f.wins[i+1].start, f.wins[i+1].startSeg
		}
		// overlapping windows: the before phase is empty
		if beforeSeg > w.startSeg {
			before, beforeSeg = w.start, w.startSeg
		}
		if afterSeg < wendSeg {
			after, afterSeg = wend, wendSeg
		}
		out = append(out, Phase{Fault: w.fault, Target: w.target,
			Before: stats(min(before, w.start), w.start, beforeSeg, w.startSeg),
			During: stats(w.start, wend, w.startSeg, wendSeg),
			After:  stats(wend, max(after, wend), wendSeg, afterSeg)})
	}
	return out
}
