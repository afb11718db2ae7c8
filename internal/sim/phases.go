package sim

import "sort"

// This file splits a case around its fault windows (MODEL §15: phases, and
// the figures around each fault).

// PhaseTruth: one fault window's before, during and after (MODEL §15).
type PhaseTruth struct {
	Fault  string     `json:"fault"`
	Before PhaseStats `json:"before"`
	During PhaseStats `json:"during"`
	After  PhaseStats `json:"after"`
}

type PhaseStats struct {
	DurationNs   int64   `json:"duration_ns"`
	Acquisitions int     `json:"acquisitions"`
	PerS         float64 `json:"acquisitions_per_s"`
	Failed       int     `json:"acquires_failed"`
	Unknown      int     `json:"acquires_unknown"`
	Unsent       int     `json:"acquires_unsent"`
	Latency      Latency `json:"latency"` // p50, p99 and max are shown
	Violations   int     `json:"violations"`
	// Any: figures not compared, and why.
	Any map[string]string `json:"any,omitempty"`
}

// phases splits the case around each fault window, in order of starts.
// A phase is the events from one boundary mark (included) to the next
// (excluded): before [previous window's end, start), during [start, end),
// after [end, next start); the case-start opens the first, the case-end
// closes the last (reading 26).
func (x *evalCtx) phases(t *CaseTruth, oks []*opRec) {
	cr := x.cr
	var ws []*faultRec
	for _, f := range cr.faults {
		if x.in(f.startIdx) {
			ws = append(ws, f)
		}
	}
	sort.Slice(ws, func(i, j int) bool { return ws[i].startIdx < ws[j].startIdx })
	endB := x.endBound()
	endOf := func(f *faultRec) int {
		if x.in(f.endIdx) {
			return f.endIdx
		}
		return endB
	}
	// the acquires that completed (or counted as unknown at a death) at
	// each index
	type done struct {
		idx     int
		outcome string
		op      *opRec
	}
	var ds []done
	for _, op := range cr.ops {
		if op.kind != "acquire" || !x.visible(op) {
			continue
		}
		o := x.outcome(op)
		switch {
		case o != "unknown" || (op.compIdx >= 0 && x.in(op.compIdx) && !op.postComp):
			ds = append(ds, done{op.compIdx, o, op})
		default:
			// in flight at its instance's death, or where the case ends
			ir := cr.inst(op.inst)
			if ir != nil && x.in(ir.deathIdx) && ir.deathIdx > op.invIdx {
				ds = append(ds, done{ir.deathIdx, o, op})
			} else {
				ds = append(ds, done{endB, o, op})
			}
		}
	}
	vs := x.violations(t.CutShort)
	// boundary: a phase, empty or not, that closes at the instant where a
	// history cut short ends (for a lane, its own last event: here the
	// next window's start): whether an acquire in flight there completed
	// in it is not said
	lastT := x.viewLastT()
	boundary := func(b int) map[string]string {
		if !t.CutShort || b > endB || x.T(min(b, x.cut-1)) < lastT {
			return nil
		}
		return map[string]string{"acquires_unknown": "the phase closes at the instant where a history cut short ends"}
	}
	stats := func(a, b int, atEnd bool) PhaseStats {
		var s PhaseStats
		if b < a {
			return s // empty: windows overlap
		}
		if b > a {
			s.DurationNs = x.T(min(b, x.cut-1)) - x.T(a)
		}
		var lat []int64
		for _, d := range ds {
			in := d.idx >= a && d.idx < b || (atEnd && d.idx == b)
			if !in {
				continue
			}
			if x.completed(d.op) {
				// the latencies of the acquires that completed in it
				lat = append(lat, x.latency(d.op))
			}
			switch d.outcome {
			case "ok":
				s.Acquisitions++
			case "fail":
				s.Failed++
			case "unsent":
				s.Unsent++
			default:
				s.Unknown++
			}
		}
		s.Latency = latencyOf(lat)
		if s.DurationNs > 0 {
			s.PerS = float64(s.Acquisitions) / (float64(s.DurationNs) / 1e9)
		}
		for _, v := range vs {
			if i := v.later.beginIdx; i >= a && i < b {
				s.Violations++
			}
		}
		if !atEnd {
			for f, why := range boundary(b) {
				s.anyf(f, why)
			}
		}
		if atEnd && t.CutShort {
			s.anyf("acquires_unknown", "the acquires in flight where a history cut short ends")
			s.anyf("duration_s", "the case was cut short")
			s.anyf("acquisitions_per_s", "the case was cut short")
		}
		return s
	}
	for i, f := range ws {
		p := PhaseTruth{Fault: f.spec.Name}
		prev := cr.startIdx
		if i > 0 {
			prev = endOf(ws[i-1])
		}
		e := endOf(f)
		next := endB
		if i+1 < len(ws) {
			next = ws[i+1].startIdx
		}
		p.Before = stats(prev, f.startIdx, false)
		if prev > f.startIdx {
			p.Before = PhaseStats{Any: boundary(f.startIdx)}
		}
		p.During = stats(f.startIdx, e, e == endB)
		p.After = stats(e, next, next == endB)
		if next < e {
			p.After = PhaseStats{Any: boundary(next)}
		}
		t.Phases = append(t.Phases, p)
	}
	_ = oks
}

func (s *PhaseStats) anyf(field, why string) {
	if s.Any == nil {
		s.Any = map[string]string{}
	}
	s.Any[field] = why
}

// faultFigures: MODEL §15's figures around each fault, and the case's ok
// acquires during and after its faults, each counted once.
func (x *evalCtx) faultFigures(t *CaseTruth, oks []*opRec) {
	cr := x.cr
	endB := x.endBound()
	for _, op := range oks {
		during, after := false, false
		for _, f := range cr.faults {
			if !x.in(f.startIdx) || op.compIdx <= f.startIdx {
				continue
			}
			if !x.in(f.endIdx) || op.compIdx < f.endIdx {
				during = true
			} else if op.compIdx > f.endIdx {
				after = true
			}
		}
		switch {
		case during:
			t.AcqDuringFaults++
		case after:
			t.AcqAfterFaults++
		}
	}
	for i, f := range cr.faults {
		ft := &t.Faults[i]
		if !x.in(f.startIdx) {
			continue
		}
		ft.Started = true
		e := endB
		if x.in(f.endIdx) {
			e = f.endIdx
		}
		ft.NextGrantNs = -1
		for _, op := range oks {
			if op.compIdx > f.startIdx && op.compIdx < e {
				ft.AcqDuring++
			}
			if x.in(f.endIdx) && op.compIdx > f.endIdx && op.compIdx < endB {
				ft.AcqAfter++
			}
			if op.compIdx > f.startIdx && op.compIdx < endB && ft.NextGrantNs < 0 && x.liveAt(op.inst, op.compIdx) {
				ft.NextGrantNs = x.T(op.compIdx) - x.T(f.startIdx)
			}
		}
		if t.CutShort {
			ft.anyf("acquisitions_after", "the case was cut short")
			if !x.in(f.endIdx) {
				ft.anyf("acquisitions_during", "the case was cut short before the heal")
			}
			if ft.NextGrantNs < 0 {
				ft.anyf("next_grant_ms", "the case was cut short")
			}
		}
	}
}
