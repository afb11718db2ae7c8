package report

import (
	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/lockbench/lockbench/checker"
)

// PhaseStats are the metrics of one stretch of a case.
type PhaseStats struct {
	DurationS       float64 `json:"duration_s"`
	Acquisitions    int     `json:"acquisitions"`
	AcquiresPerSec  float64 `json:"acquisitions_per_s"`
	AcquiresFailed  int     `json:"acquires_failed"`
	AcquiresUnknown int     `json:"acquires_unknown"`
	P50             float64 `json:"p50_ms"`
	P99             float64 `json:"p99_ms"`
	Max             float64 `json:"max_ms"`
	Violations      int     `json:"violations"`
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

// segment is the stretch between two fault marks.
type segment struct {
	start, end           int64
	acq, failed, unknown int
	hist                 *hdrhistogram.Histogram
	x                    exact
}

type window struct {
	fault, target string
	start, end    int64
}

func newSegment(start int64) *segment {
	return &segment{start: start, end: start, hist: hdrhistogram.New(histMin, histMax, histSig)}
}

// phases computes the phases of every fault window from the segments and
// the checker's violation counts per segment.
func phases(segs []*segment, wins []window, caseStart, caseEnd int64, viol []checker.Segment) []Phase {
	stats := func(a, b int64) PhaseStats {
		var ps PhaseStats
		h := hdrhistogram.New(histMin, histMax, histSig)
		var x exact
		for _, s := range segs {
			if s.start >= a && s.end <= b && s.end >= s.start {
				ps.Acquisitions += s.acq
				ps.AcquiresFailed += s.failed
				ps.AcquiresUnknown += s.unknown
				h.Merge(s.hist)
				if s.x.n > 0 {
					x.add(s.x.min)
					x.add(s.x.max)
				}
			}
		}
		for i, v := range viol {
			start := v.Start
			if i == 0 {
				start = caseStart
			}
			if start >= a && start < b {
				ps.Violations += v.Violations
			}
		}
		ps.DurationS = float64(b-a) / 1e9
		if ps.DurationS > 0 {
			ps.AcquiresPerSec = float64(ps.Acquisitions) / ps.DurationS
		}
		p := percentiles(h, x)
		ps.P50, ps.P99, ps.Max = p.P50, p.P99, p.Max
		return ps
	}
	var out []Phase
	for i, w := range wins {
		end := w.end
		if end < w.start { // never healed before the case ended
			end = caseEnd
		}
		before := caseStart
		if i > 0 && wins[i-1].end >= wins[i-1].start {
			before = wins[i-1].end
		}
		after := caseEnd
		if i+1 < len(wins) {
			after = wins[i+1].start
		}
		if before > w.start {
			before = w.start // overlapping windows: the before phase is empty
		}
		if after < end {
			after = end
		}
		out = append(out, Phase{Fault: w.fault, Target: w.target,
			Before: stats(before, w.start), During: stats(w.start, end), After: stats(end, after)})
	}
	return out
}
