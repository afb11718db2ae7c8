package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// Thresholds (MODEL §19): criteria on a case's figures, chosen once the
// case has run so that some pass and some fail (a count by exactly one, a
// latency by a few percent: the checker's percentiles are an HDR
// histogram's), written into the case meta.

type ThresholdTruth struct {
	Source   string  `json:"threshold"`
	Metric   string  `json:"metric"`
	Observed float64 `json:"observed"`
	Pass     bool    `json:"pass"`
	// NoValue: the figure has no value (a latency with no sample, any
	// figure of a case cut short): the threshold fails (MODEL §19).
	NoValue bool `json:"no_value"`
	// HDR: the observed value is an HDR percentile: compared within its
	// precision.
	HDR bool `json:"hdr,omitempty"`
	// Any: not compared at all, and why; PassAny: the verdict is not
	// compared (the bound lies within the figure's precision).
	Any     string `json:"any,omitempty"`
	PassAny string `json:"pass_any,omitempty"`
}

type thresholdMetric struct {
	name string
	kind int // 0: duration (ms), 1: rate (/s), 2: count
}

var thresholdMetrics = []thresholdMetric{
	{"acquire_max", 0}, {"acquire_p50", 0}, {"acquire_p90", 0}, {"acquire_p99", 0}, {"acquire_p999", 0},
	{"acquires_dropped", 2}, {"acquires_failed", 2}, {"acquires_unknown", 2}, {"acquisitions", 2},
	{"handoff_p50", 0}, {"handoff_p99", 0}, {"leases_lost", 2}, {"longest_gap", 0}, {"lost_updates", 2},
	{"overlap_max", 0}, {"overlap_p50", 0}, {"stale_writes_accepted", 2}, {"stale_writes_rejected", 2},
	{"throughput", 1}, {"token_regressions", 2}, {"violations", 2}, {"zombie_max", 0}, {"zombie_p50", 0}, {"zombies", 2},
}

// metric is the figure a threshold names, in its base unit (ms, /s, a
// count): has false when it has no value; why != "" when the truth does
// not know it; hdr when the checker reports it from an HDR histogram.
func (t *CaseTruth) metric(name string) (v float64, has bool, why string, hdr bool) {
	ms := func(ns int64) float64 { return float64(ns) / 1e6 }
	lat := func(l Latency, ns int64, isHDR bool) (float64, bool, string, bool) {
		return ms(ns), l.Count > 0, "", isHDR
	}
	anyOf := func(f string) string {
		if w, ok := t.Any[f]; ok {
			return w
		}
		return ""
	}
	switch name {
	case "acquire_max":
		return lat(t.AcquireLatency, t.AcquireLatency.MaxNs, false)
	case "acquire_p50":
		return lat(t.AcquireLatency, t.AcquireLatency.P50Ns, true)
	case "acquire_p90":
		return lat(t.AcquireLatency, t.AcquireLatency.P90Ns, true)
	case "acquire_p99":
		return lat(t.AcquireLatency, t.AcquireLatency.P99Ns, true)
	case "acquire_p999":
		return lat(t.AcquireLatency, t.AcquireLatency.P999Ns, true)
	case "handoff_p50", "handoff_p99":
		if w := anyOf("metrics.handoff_latency"); w != "" {
			return 0, false, w, true
		}
		if name == "handoff_p50" {
			return lat(t.Handoff, t.Handoff.P50Ns, true)
		}
		return lat(t.Handoff, t.Handoff.P99Ns, true)
	case "acquires_dropped":
		return float64(t.Dropped), true, "", false
	case "acquisitions":
		return float64(t.AcquiresOK), true, "", false
	case "acquires_failed":
		return float64(t.AcquiresFailed), true, "", false
	case "acquires_unknown":
		return float64(t.AcquiresUnknown), true, "", false
	case "violations":
		return float64(t.Violations), true, "", false
	case "lost_updates":
		return float64(t.Resource.LostUpdates), true, "", false
	case "stale_writes_accepted":
		return float64(t.Resource.StaleAccepted), true, "", false
	case "stale_writes_rejected":
		return float64(t.Resource.StaleRejected), true, "", false
	case "token_regressions":
		return float64(t.TokenRegressions), true, "", false
	case "leases_lost":
		return float64(t.LeasesLost), true, "", false
	case "longest_gap":
		if t.LongestGapNs < 0 {
			return 0, false, "the gap is not defined on this history", false
		}
		return ms(t.LongestGapNs), true, "", false
	case "overlap_max":
		return ms(t.OverlapMaxNs), true, anyOf("overlap_max_ms"), false
	case "overlap_p50":
		return ms(t.OverlapP50Ns), true, anyOf("overlap_p50_ms"), false
	case "zombies":
		return float64(t.Zombies), true, anyOf("zombies"), false
	case "zombie_max":
		return ms(t.ZombieMaxNs), true, anyOf("zombie_max_ms"), false
	case "zombie_p50":
		return ms(t.ZombieP50Ns), true, anyOf("zombie_p50_ms"), false
	case "throughput":
		return t.Throughput, true, "", false
	}
	return 0, false, "the truth does not know " + name, false
}

// hdrBand is the range the checker's HDR value of an exact v (ms) may take.
func hdrBand(v float64) (lo, hi float64) { return v - 0.001, v*1.001 + 0.001 }

func (t *CaseTruth) judge(th thresholdRec) ThresholdTruth {
	tt := ThresholdTruth{Source: th.source, Metric: th.metric}
	if t.CutShort {
		// §19: no figure of a case cut short has a value
		tt.NoValue = true
		return tt
	}
	if t.EventsLost {
		switch th.metric {
		case "stale_writes_accepted", "stale_writes_rejected", "lost_updates":
			// the resource's own marks: no worker writes them (§12)
		default:
			// §12, §19 (A4): a figure read from worker lines that the
			// lost lines could have moved either way has no value
			tt.NoValue = true
			return tt
		}
	}
	v, has, why, hdr := t.metric(th.metric)
	tt.HDR = hdr
	if why != "" {
		tt.Any = why
		return tt
	}
	if !has {
		tt.NoValue = true
		return tt
	}
	tt.Observed, tt.Pass = v, judgeThreshold(th.op, v, th.value)
	if hdr {
		lo, hi := hdrBand(v)
		if judgeThreshold(th.op, lo, th.value) != tt.Pass || judgeThreshold(th.op, hi, th.value) != tt.Pass {
			tt.PassAny = "the bound lies within the HDR precision of the figure"
		}
	}
	return tt
}

func judgeThreshold(op string, obs, v float64) bool {
	switch op {
	case "<":
		return obs < v
	case "<=":
		return obs <= v
	case ">":
		return obs > v
	case ">=":
		return obs >= v
	case "==":
		return obs == v
	case "!=":
		return obs != v
	}
	return false
}

// chooseThresholds writes 1-3 thresholds into the case's meta, near the
// figures of its first view (the case, or its first lane).
func (r *Run) chooseThresholds(cr *caseRec, rng *rand.Rand) {
	t := cr.views()[0].truth(r.Events, len(r.Events), 0)
	ops := []string{"<", "<=", ">", ">=", "==", "!="}
	for i := 0; i < 1+rng.IntN(3); i++ {
		m := thresholdMetrics[rng.IntN(len(thresholdMetrics))]
		obs, has, why, _ := t.metric(m.name)
		if why != "" {
			continue
		}
		op := ops[rng.IntN(len(ops))]
		var v float64
		var src string
		switch m.kind {
		case 0:
			// whole µs, away from the figure by more than its precision
			if op == "==" || op == "!=" {
				op = "<"
			}
			f := 1 + 0.03 + 0.2*rng.Float64()
			if rng.IntN(2) == 0 {
				f = 1 - 0.03 - 0.2*rng.Float64()
			}
			if !has {
				obs = 5 + 50*rng.Float64()
			}
			us := math.Round(obs * f * 1000)
			if math.Abs(us/1000-obs) < 0.01 {
				us += 20 * float64(1-2*rng.IntN(2))
			}
			us = max(us, 0)
			v = us / 1000
			src = fmt.Sprintf("%s %s %dus", m.name, op, int64(us))
		case 1:
			if op == "==" || op == "!=" {
				op = ">"
			}
			if rng.IntN(2) == 0 {
				v = math.Floor(obs) - 1
			} else {
				v = math.Ceil(obs) + 1
			}
			v = max(v, 0)
			src = fmt.Sprintf("%s %s %d/s", m.name, op, int64(v))
		default:
			v = max(obs+float64(rng.IntN(3)-1), 0)
			src = fmt.Sprintf("%s %s %d", m.name, op, int64(v))
		}
		cr.thresholds = append(cr.thresholds, thresholdRec{source: src, metric: m.name, op: op, value: v})
		cr.meta.Thresholds = append(cr.meta.Thresholds, src)
	}
	if _, has, why, _ := t.metric("handoff_p99"); why == "" && !has && rng.IntN(2) == 0 {
		// a latency with no sample has no value: the threshold fails
		us := 20000 + rng.IntN(80000)
		src := fmt.Sprintf("handoff_p99 < %dus", us)
		cr.thresholds = append(cr.thresholds, thresholdRec{source: src, metric: "handoff_p99", op: "<", value: float64(us) / 1000})
		cr.meta.Thresholds = append(cr.meta.Thresholds, src)
	}
	r.Events[cr.startIdx].Meta = cr.meta.encode()
}
