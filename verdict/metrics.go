package verdict

import (
	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/lockbench/lockbench/checker"
	"github.com/lockbench/lockbench/history"
)

// Metrics of one case: the checker's figures (MODEL §15) in the summary's
// metrics section, and, for the plots, what happened over time. Every
// figure is the checker's, computed from the same events as the verdicts,
// so a threshold and the summary's check section never disagree.
type Metrics struct {
	DurationS       float64 `json:"duration_s"`
	Acquisitions    int     `json:"acquisitions"`
	AcquiresPerSec  float64 `json:"acquisitions_per_s"`
	AcquiresFailed  int     `json:"acquires_failed"`
	AcquiresUnknown int     `json:"acquires_unknown"`
	// AcquiresUnsent are the acquires surely never sent (MODEL §3).
	AcquiresUnsent   int                 `json:"acquires_unsent,omitempty"`
	Releases         int                 `json:"releases"`
	Extensions       int                 `json:"extensions"`
	ExtensionsFailed int                 `json:"extensions_failed"`
	LeasesLost       int                 `json:"leases_lost"`
	AcquireLatency   checker.Percentiles `json:"acquire_latency"`
	// Handoff is the hand-off latency under contention: from the moment a
	// holder starts releasing a key that another client is waiting for to
	// the moment another client's acquire of that key returns (MODEL §15).
	Handoff checker.Percentiles `json:"handoff_latency"`
	// HandoffBarges counts the hand-offs that ended with the releaser
	// itself granted the key again: the lock went back to its holder,
	// not over, so they give no Handoff sample (MODEL §15).
	HandoffBarges int                 `json:"handoff_barges"`
	HoldTime      checker.Percentiles `json:"hold_time"`
	// Dropped counts open-loop attempts that could not start on time
	// because every client was busy (k6's dropped_iterations).
	Dropped int `json:"acquires_dropped"`
	// OfferedPerSec is, in open loop, the rate of attempts the schedule
	// made (started or dropped); AcquiresPerSec is what was achieved.
	OfferedPerSec float64 `json:"offered_per_s,omitempty"`
	// LongestGapMs is MODEL §11's longest gap.
	LongestGapMs float64 `json:"longest_gap_ms"`
	// AcquisitionsDuringFaults and AcquisitionsAfterFaults count each ok
	// acquire once (MODEL §15).
	AcquisitionsDuringFaults int `json:"acquisitions_during_faults"`
	AcquisitionsAfterFaults  int `json:"acquisitions_after_faults"`
	// Phases split the metrics before, during and after each fault window.
	Phases []checker.Phase `json:"phases,omitempty"`

	acq  *hdrhistogram.Histogram
	plot *Timeline
}

// LatencyHistogram returns the acquire-latency histogram (µs), for plots.
func (m *Metrics) LatencyHistogram() *hdrhistogram.Histogram { return m.acq }

// Timeline is what a case did over time, for its plots: believed holds,
// the writes the resource refused or let through late, the fault windows
// and the acquisitions per SeriesStep. It is drawn from the events the
// checker counted (a posthumous grant is no bar).
func (m *Metrics) Timeline() *Timeline {
	if m.plot == nil {
		return &Timeline{}
	}
	return m.plot
}

// Timeline is the plot data of one case.
type Timeline struct {
	Start int64 // the case's start
	// Spans are believed holds (capped at MaxSpans), Writes the writes the
	// timeline marks, Windows the fault windows (End -1: never healed),
	// Series the acquisitions and slowest acquisition per SeriesStep.
	Spans   []Span
	Writes  []WriteMark
	Windows []Window
	Series  []Point
}

// Span is one client's believed hold of a key.
type Span struct {
	Proc, Key  string
	Start, End int64
}

// WriteMark is a write the timeline marks: refused by the fencing check
// (Rejected), or accepted although someone else had written since the
// writer's read (stale, or lost on the unfenced register).
type WriteMark struct {
	Proc, Key string
	T         int64
	Rejected  bool
}

// Window is one fault window.
type Window struct {
	Fault, Target string
	Start, End    int64
}

// Point is one step of the time series.
type Point struct {
	Acquisitions int
	MaxMs        float64
}

// MaxSpans caps the intervals kept for the timeline plot of one case.
const MaxSpans = 4000

// SeriesStep is the width of one point of the time series.
const SeriesStep = 250 * 1e6 // ns

// timeliner gathers a case's Timeline from the events the checker counted.
type timeliner struct {
	tl       Timeline
	end      int64
	invoked  map[string]int64
	heldFrom map[string]int64
	heldKey  map[string]string
}

func newTimeliner(start int64) *timeliner {
	return &timeliner{tl: Timeline{Start: start}, end: start, invoked: map[string]int64{}, heldFrom: map[string]int64{}, heldKey: map[string]string{}}
}

// add takes one event the checker judged.
func (a *timeliner) add(e *history.Event, counted bool) {
	if !counted {
		return
	}
	a.end = max(a.end, e.T)
	switch {
	case e.Type == history.Invoke && e.F == history.OpAcquire:
		a.invoked[e.Proc] = e.T
		if e.Intended > 0 {
			a.invoked[e.Proc] = e.Intended
		}
	case e.Type == history.OK && e.F == history.OpAcquire:
		p := a.point(e.T)
		p.Acquisitions++
		if t, ok := a.invoked[e.Proc]; ok {
			p.MaxMs = max(p.MaxMs, float64(e.T-t)/1e6)
		}
		a.heldFrom[e.Proc], a.heldKey[e.Proc] = e.T, e.Key
	case e.Type == history.Invoke && e.F == history.OpRelease, e.Type == history.OK && e.F == history.OpLost:
		a.endSpan(e.Proc, e.T)
	case e.Type == history.Mark && e.F == history.MarkCrash:
		for proc := range a.heldFrom {
			if instanceOfProc(proc) == e.Proc {
				a.endSpan(proc, e.T)
			}
		}
	case e.Type == history.Mark && e.F == history.MarkResWrite:
		bad := e.Fenced == history.FencedRejected || e.Fenced == history.FencedStale || e.Lost
		if bad && len(a.tl.Writes) < MaxSpans {
			a.tl.Writes = append(a.tl.Writes, WriteMark{Proc: e.Proc, Key: e.Key, T: e.T, Rejected: e.Fenced == history.FencedRejected})
		}
	case e.Type == history.Mark && e.F == history.MarkFaultStart:
		a.tl.Windows = append(a.tl.Windows, Window{Fault: e.Fault, Target: e.Target, Start: e.T, End: -1})
	case e.Type == history.Mark && e.F == history.MarkFaultEnd:
		for i := len(a.tl.Windows) - 1; i >= 0; i-- {
			if w := &a.tl.Windows[i]; w.Fault == e.Fault && w.End < 0 {
				w.End = e.T
				break
			}
		}
	}
}

func (a *timeliner) endSpan(proc string, t int64) {
	from, ok := a.heldFrom[proc]
	if !ok {
		return
	}
	if len(a.tl.Spans) < MaxSpans {
		a.tl.Spans = append(a.tl.Spans, Span{Proc: proc, Key: a.heldKey[proc], Start: from, End: t})
	}
	delete(a.heldFrom, proc)
	delete(a.heldKey, proc)
}

// point returns the series point of time t (up to one hour of points).
func (a *timeliner) point(t int64) *Point {
	i := min(max(int((t-a.tl.Start)/SeriesStep), 0), 14400)
	for len(a.tl.Series) <= i {
		a.tl.Series = append(a.tl.Series, Point{})
	}
	return &a.tl.Series[i]
}

// close ends what is still held and returns the timeline.
func (a *timeliner) close() *Timeline {
	for proc := range a.heldFrom {
		a.endSpan(proc, a.end)
	}
	return &a.tl
}

// metricsOf is a case's Metrics: the checker's figures and counts, and the
// timeline.
func metricsOf(res checker.Result, tl *Timeline) Metrics {
	f := res.Figures
	return Metrics{
		DurationS: f.DurationS, Acquisitions: res.AcquiresOK, AcquiresPerSec: f.AcquiresPerSec,
		AcquiresFailed: res.AcquiresFailed, AcquiresUnknown: res.AcquiresUnknown, AcquiresUnsent: res.AcquiresUnsent,
		Releases: f.Releases, Extensions: f.Extensions, ExtensionsFailed: f.ExtensionsFailed, LeasesLost: res.LeasesLost,
		AcquireLatency: f.AcquireLatency, Handoff: f.Handoff, HandoffBarges: f.HandoffBarges, HoldTime: f.HoldTime,
		Dropped: f.Dropped, OfferedPerSec: f.OfferedPerSec, LongestGapMs: res.Liveness.LongestGapMs,
		AcquisitionsDuringFaults: f.AcquiresDuringFaults, AcquisitionsAfterFaults: f.AcquiresAfterFaults,
		Phases: f.Phases,
		acq:    f.AcquireHistogram(),
		plot:   tl,
	}
}
