package report

import (
	"math"
	"strings"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/lockbench/lockbench/checker"
	"github.com/lockbench/lockbench/history"
)

// Histogram bounds: 1 µs to 10 min, 3 significant digits. Values are µs.
const (
	histMin = 1
	histMax = 600_000_000
	histSig = 3
)

// Percentiles of a latency in milliseconds. The percentiles come from an
// HDR histogram (3 significant digits); Min and Max are the recorded
// values themselves, never a bucket edge (MODEL §15): a threshold on the
// slowest acquisition judges the acquisition, not the bucket it fell in.
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

// exact keeps the smallest and largest value recorded (ns).
type exact struct {
	n        int64
	min, max int64
}

func (x *exact) add(ns int64) {
	if x.n == 0 || ns < x.min {
		x.min = ns
	}
	if x.n == 0 || ns > x.max {
		x.max = ns
	}
	x.n++
}

// Metrics of one case. Aggregation streams: memory is bounded by the number
// of clients and keys (two fixed-size HDR histograms), whatever the length
// of the run.
type Metrics struct {
	DurationS        float64     `json:"duration_s"`
	Acquisitions     int         `json:"acquisitions"`
	AcquiresPerSec   float64     `json:"acquisitions_per_s"`
	AcquiresFailed   int         `json:"acquires_failed"`
	AcquiresUnknown  int         `json:"acquires_unknown"`
	Releases         int         `json:"releases"`
	Extensions       int         `json:"extensions"`
	ExtensionsFailed int         `json:"extensions_failed"`
	LeasesLost       int         `json:"leases_lost"`
	AcquireLatency   Percentiles `json:"acquire_latency"`
	// Handoff is the hand-off latency under contention: from the moment a
	// holder starts releasing a key that another client is waiting for to
	// the moment the next holder's acquire of that key returns. It measures
	// the lock's own hand-over, which the acquire latency mixes with the
	// waiting for the holder's work and with the retry backoff.
	Handoff  Percentiles `json:"handoff_latency"`
	HoldTime Percentiles `json:"hold_time"`
	// Dropped counts open-loop attempts that could not start on time
	// because every client was busy (k6's dropped_iterations).
	Dropped int `json:"acquires_dropped"`
	// OfferedPerSec is, in open loop, the rate of attempts the schedule
	// made (started or dropped); AcquiresPerSec is what was achieved.
	OfferedPerSec float64 `json:"offered_per_s,omitempty"`
	offered       int
	// LongestGapMs is the longest time any key went without a successful
	// acquisition while the case ran: how long the lock was unavailable.
	LongestGapMs float64 `json:"longest_gap_ms"`
	// Phases split the metrics before, during and after each fault window.
	Phases []Phase `json:"phases,omitempty"`

	acq     *hdrhistogram.Histogram
	hold    *hdrhistogram.Histogram
	handoff *hdrhistogram.Histogram
	// acqX, holdX, handoffX are the exact extremes of the same values.
	acqX, holdX, handoffX exact

	segs []*segment
	wins []window
	// series holds per-interval counts for the time-series plot: bounded
	// by the case's duration over SeriesStep.
	series []point
	start  int64
	// spans are believed-held intervals for the holder timeline (capped),
	// marks the writes the fenced register refused or let through late.
	spans []span
	marks []writeMark
}

// writeMark is a write the timeline marks: refused by the fencing check
// (rejected), or accepted although someone else had written since the
// writer's read (stale, or lost on the unfenced register).
type writeMark struct {
	proc, key string
	t         int64
	rejected  bool
}

// span is one client's believed hold of a key.
type span struct {
	proc, key  string
	start, end int64
}

// MaxSpans caps the intervals kept for the timeline plot of one case.
const MaxSpans = 4000

// SeriesStep is the width of one point of the time series.
const SeriesStep = 250 * 1e6 // ns

type point struct {
	acq   int
	maxMs float64
}

// Aggregator computes Metrics from a case's events.
type Aggregator struct {
	m        Metrics
	start    int64
	end      int64
	invoked  map[string]int64  // proc -> acquire invoke time
	heldFrom map[string]int64  // proc -> acquire ok time
	heldKey  map[string]string // proc -> key it holds
	lastAcq  map[string]int64  // key -> last ok acquire time
	maxGap   int64
	stopped  bool // end is the workload's stop
	// waiting counts the acquires in flight per key; handFrom is when a
	// holder started releasing a key somebody was waiting for.
	waiting  map[string]int
	waitKey  map[string]string // proc -> key of its acquire in flight
	handFrom map[string]int64
}

// NewAggregator returns an aggregator for a case that started at start.
func NewAggregator(start int64) *Aggregator {
	return &Aggregator{
		m: Metrics{start: start, acq: hdrhistogram.New(histMin, histMax, histSig), hold: hdrhistogram.New(histMin, histMax, histSig),
			handoff: hdrhistogram.New(histMin, histMax, histSig), segs: []*segment{newSegment(start)}},
		start:    start,
		end:      start,
		invoked:  map[string]int64{},
		heldFrom: map[string]int64{},
		heldKey:  map[string]string{},
		lastAcq:  map[string]int64{},
		waiting:  map[string]int{},
		waitKey:  map[string]string{},
		handFrom: map[string]int64{},
	}
}

func us(ns int64) int64 {
	v := ns / 1000
	if v < histMin {
		return histMin
	}
	if v > histMax {
		return histMax
	}
	return v
}

// Add feeds one event.
func (a *Aggregator) Add(e *history.Event) {
	if e.T > a.end && !a.stopped {
		a.end = e.T
	}
	seg := a.m.segs[len(a.m.segs)-1]
	seg.end = e.T
	switch {
	case e.Type == history.OK && e.F == history.OpDropped:
		a.m.Dropped++
		a.m.offered++
	case e.Type == history.Invoke && e.F == history.OpAcquire:
		a.invoked[e.Proc] = e.T
		if e.Intended > 0 {
			// Open loop: the wait for a free client counts.
			a.invoked[e.Proc] = e.Intended
			a.m.offered++
		}
		a.waitKey[e.Proc] = e.Key
		a.waiting[e.Key]++
	case e.F == history.OpAcquire && e.Type != history.Invoke:
		switch e.Type {
		case history.OK:
			a.m.Acquisitions++
			seg.acq++
			p := a.point(e.T)
			p.acq++
			if t, ok := a.invoked[e.Proc]; ok {
				a.m.acqX.add(e.T - t)
				_ = a.m.acq.RecordValue(us(e.T - t)) // clamped to the range: cannot fail
				_ = seg.hist.RecordValue(us(e.T - t))
				seg.x.add(e.T - t)
				if ms := float64(e.T-t) / 1e6; ms > p.maxMs {
					p.maxMs = ms
				}
			}
			a.heldFrom[e.Proc] = e.T
			a.heldKey[e.Proc] = e.Key
			if from, ok := a.handFrom[e.Key]; ok {
				a.m.handoffX.add(e.T - from)
				_ = a.m.handoff.RecordValue(us(e.T - from))
				delete(a.handFrom, e.Key)
			}
			from, ok := a.lastAcq[e.Key]
			if !ok {
				from = a.start
			}
			if g := e.T - from; g > a.maxGap {
				a.maxGap = g
			}
			a.lastAcq[e.Key] = e.T
		case history.Fail:
			a.m.AcquiresFailed++
			seg.failed++
		case history.Info:
			a.m.AcquiresUnknown++
			seg.unknown++
		}
		delete(a.invoked, e.Proc)
		if k, ok := a.waitKey[e.Proc]; ok {
			a.waiting[k]--
			delete(a.waitKey, e.Proc)
		}
	case e.Type == history.Invoke && e.F == history.OpRelease:
		if a.waiting[e.Key] > 0 {
			a.handFrom[e.Key] = e.T
		}
		if t, ok := a.heldFrom[e.Proc]; ok {
			a.m.holdX.add(e.T - t)
			_ = a.m.hold.RecordValue(us(e.T - t))
		}
		a.endSpan(e.Proc, e.T)
	case e.Type == history.OK && e.F == history.OpLost:
		a.m.LeasesLost++
		a.endSpan(e.Proc, e.T)
	case e.Type == history.Mark && e.F == history.MarkCrash:
		for proc := range a.heldFrom {
			if strings.HasPrefix(proc, e.Proc+"c") {
				a.endSpan(proc, e.T)
			}
		}
	case e.Type == history.OK && e.F == history.OpRelease:
		a.m.Releases++
	case e.F == history.OpExtend && e.Type == history.OK:
		a.m.Extensions++
	case e.F == history.OpExtend && (e.Type == history.Fail || e.Type == history.Info):
		a.m.ExtensionsFailed++
	case e.Type == history.Mark && e.F == history.MarkResWrite:
		bad := e.Fenced == history.FencedRejected || e.Fenced == history.FencedStale || e.Lost
		if bad && len(a.m.marks) < MaxSpans {
			a.m.marks = append(a.m.marks, writeMark{proc: e.Proc, key: e.Key, t: e.T, rejected: e.Fenced == history.FencedRejected})
		}
	case e.Type == history.Mark && e.F == history.MarkCaseStop:
		a.end, a.stopped = e.T, true
	case e.Type == history.Mark && e.F == history.MarkCaseEnd:
		if !a.stopped {
			a.end = e.T
		}
	case e.Type == history.Mark && e.F == history.MarkFaultStart:
		a.m.wins = append(a.m.wins, window{fault: e.Fault, target: e.Target, start: e.T, end: -1})
		a.m.segs = append(a.m.segs, newSegment(e.T))
	case e.Type == history.Mark && e.F == history.MarkFaultEnd:
		for i := len(a.m.wins) - 1; i >= 0; i-- {
			if a.m.wins[i].fault == e.Fault && a.m.wins[i].end < 0 {
				a.m.wins[i].end = e.T
				break
			}
		}
		a.m.segs = append(a.m.segs, newSegment(e.T))
	}
}

// endSpan closes proc's believed hold at t.
func (a *Aggregator) endSpan(proc string, t int64) {
	from, ok := a.heldFrom[proc]
	if !ok {
		return
	}
	if len(a.m.spans) < MaxSpans {
		a.m.spans = append(a.m.spans, span{proc: proc, key: a.heldKey[proc], start: from, end: t})
	}
	delete(a.heldFrom, proc)
	delete(a.heldKey, proc)
}

// point returns the series point of time t, growing the series as needed
// (up to one hour of points).
func (a *Aggregator) point(t int64) *point {
	i := int((t - a.start) / SeriesStep)
	if i < 0 {
		i = 0
	}
	if i > 14400 {
		i = 14400
	}
	for len(a.m.series) <= i {
		a.m.series = append(a.m.series, point{})
	}
	return &a.m.series[i]
}

// CloseWith finishes the metrics with the checker's result: every figure
// the checker defines (acquisitions by outcome, leases lost, the longest
// gap) is the checker's, so a threshold and the summary's check section
// never disagree (MODEL §15); violations are split into phases with its
// per-segment counts.
func (a *Aggregator) CloseWith(res checker.Result) Metrics {
	m := a.Close()
	m.Acquisitions = res.AcquiresOK
	m.AcquiresFailed = res.AcquiresFailed
	m.AcquiresUnknown = res.AcquiresUnknown
	m.LeasesLost = res.LeasesLost
	m.LongestGapMs = res.Liveness.LongestGapMs
	if m.DurationS > 0 {
		m.AcquiresPerSec = float64(m.Acquisitions) / m.DurationS
	}
	m.Phases = phases(m.segs, m.wins, a.start, a.end, res.Segments)
	return m
}

// Close finishes the metrics.
func (a *Aggregator) Close() Metrics {
	for proc := range a.heldFrom { // still held at the end
		a.endSpan(proc, a.end)
	}
	m := a.m
	m.DurationS = float64(a.end-a.start) / 1e9
	if m.DurationS > 0 {
		m.AcquiresPerSec = float64(m.Acquisitions) / m.DurationS
		m.OfferedPerSec = float64(m.offered) / m.DurationS
	}
	for _, t := range a.lastAcq {
		if g := a.end - t; g > a.maxGap {
			a.maxGap = g
		}
	}
	if len(a.lastAcq) == 0 {
		a.maxGap = a.end - a.start
	}
	m.LongestGapMs = float64(a.maxGap) / 1e6
	m.AcquireLatency = percentiles(m.acq, m.acqX)
	m.Handoff = percentiles(m.handoff, m.handoffX)
	m.HoldTime = percentiles(m.hold, m.holdX)
	return m
}

func percentiles(h *hdrhistogram.Histogram, x exact) Percentiles {
	ms := func(v int64) float64 { return math.Round(float64(v)/1e3*1000) / 1000 }
	if h.TotalCount() == 0 {
		return Percentiles{}
	}
	// The recorded extremes in ms, rounded to the nanosecond.
	nsms := func(ns int64) float64 { return math.Round(float64(ns)) / 1e6 }
	return Percentiles{
		Count: h.TotalCount(),
		Mean:  math.Round(h.Mean()) / 1e3,
		Min:   nsms(x.min),
		P50:   ms(h.ValueAtQuantile(50)),
		P90:   ms(h.ValueAtQuantile(90)),
		P99:   ms(h.ValueAtQuantile(99)),
		P999:  ms(h.ValueAtQuantile(99.9)),
		Max:   nsms(x.max),
	}
}

// LatencyHistogram returns the acquire-latency histogram (µs) for plots.
func (m *Metrics) LatencyHistogram() *hdrhistogram.Histogram { return m.acq }
