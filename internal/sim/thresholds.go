package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// Thresholds (MODEL §14, §15): criteria on the checker's own counts,
// chosen once the case has run so that some pass and some fail by exactly
// one, written into the case meta.

type ThresholdTruth struct {
	Source   string  `json:"threshold"`
	Observed float64 `json:"observed"`
	Pass     bool    `json:"pass"`
	Any      string  `json:"any,omitempty"`
}

var thresholdMetrics = []string{"acquisitions", "acquires_failed", "acquires_unknown", "violations", "lost_updates",
	"stale_writes_accepted", "stale_writes_rejected", "token_regressions", "leases_lost", "longest_gap"}

// observed is the metric's value in the truth (§15: the checker's counts);
// ok false when the truth does not know it.
func (t *CaseTruth) observed(metric string) (float64, bool) {
	switch metric {
	case "acquisitions":
		return float64(t.AcquiresOK), true
	case "acquires_failed":
		return float64(t.AcquiresFailed), true
	case "acquires_unknown":
		return float64(t.AcquiresUnknown), true
	case "violations":
		return float64(t.Violations), true
	case "lost_updates":
		return float64(t.Resource.LostUpdates), true
	case "stale_writes_accepted":
		return float64(t.Resource.StaleAccepted), true
	case "stale_writes_rejected":
		return float64(t.Resource.StaleRejected), true
	case "token_regressions":
		return float64(t.TokenRegressions), true
	case "leases_lost":
		return float64(t.LeasesLost), true
	case "longest_gap":
		return float64(t.LongestGapNs) / 1e6, t.LongestGapNs >= 0
	}
	return 0, false
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

func (r *Run) chooseThresholds(cr *caseRec, rng *rand.Rand) {
	t := cr.truth(r.Events, len(r.Events), 0)
	ops := []string{"<", "<=", ">", ">=", "==", "!="}
	for i := 0; i < 1+rng.IntN(3); i++ {
		m := thresholdMetrics[rng.IntN(len(thresholdMetrics))]
		obs, ok := t.observed(m)
		if !ok {
			continue
		}
		op := ops[rng.IntN(len(ops))]
		var v float64
		var src string
		if m == "longest_gap" {
			// whole milliseconds, never within a millisecond of the gap
			if rng.IntN(2) == 0 {
				v = math.Floor(obs) - 1
			} else {
				v = math.Ceil(obs) + 1
			}
			if v < 0 {
				v = 0
			}
			if op == "==" || op == "!=" {
				op = "<"
			}
			src = fmt.Sprintf("%s %s %dms", m, op, int64(v))
		} else {
			v = obs + float64(rng.IntN(3)-1)
			if v < 0 {
				v = 0
			}
			src = fmt.Sprintf("%s %s %d", m, op, int64(v))
		}
		cr.thresholds = append(cr.thresholds, thresholdRec{source: src, metric: m, op: op, value: v})
		cr.meta.Thresholds = append(cr.meta.Thresholds, src)
	}
	r.Events[cr.startIdx].Meta = cr.meta.encode()
}
