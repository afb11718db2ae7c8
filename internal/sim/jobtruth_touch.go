package sim

import (
	"math"
	"slices"
	"strconv"
)

// This file works out the jobs a fault touched, their stuck time, and a
// periodic job's figures (MODEL §20), for jobtruth.go.

// touched works out the jobs the observed faults met, by phase and by
// fault, and the stuck times (MODEL §20).
func (v *laneView) touched(j *JobsTruthFigures, applied map[string][]*jcommit, duplicated map[string]bool) {
	j.TouchedPhases = map[string]int{}
	seen := map[string]bool{}
	var stuck []float64
	for _, f := range v.faults {
		if !v.observed(f) {
			continue
		}
		jf := JobFaultTruth{Fault: f.name, Phases: map[string]int{}}
		if f.aimed {
			jf.Aimed = f.phase
		}
		mine := map[string]bool{}
		targets := f.targets()
		onInstance := targets != nil
		if !onInstance && f.target != "postgres-1" {
			onInstance, targets = true, map[int]bool{} // an instance target that was never resolved: none
		}
		for _, a := range v.attempts {
			if (onInstance && !targets[a.inst]) || !v.inFlight(a, f.start) {
				continue
			}
			ph := phaseAt(a, f.start)
			j.TouchedPhases[ph]++
			jf.Phases[ph]++
			if !mine[a.job] {
				mine[a.job] = true
				jf.Touched++
				if duplicated[a.job] {
					jf.Duplicated++
				}
			}
			if onInstance {
				j.Stuck++
				if d, ok := v.stuck(a, f, targets, applied); ok {
					stuck = append(stuck, d)
				} else {
					j.StuckOpen++
				}
			}
			if !seen[a.job] {
				seen[a.job] = true
				j.Touched++
				if duplicated[a.job] {
					j.TouchedDuplicated++
				}
				if len(applied[a.job]) == 0 {
					j.TouchedLost++
				}
			}
		}
		j.Faults = append(j.Faults, jf)
	}
	if len(stuck) > 0 {
		slices.Sort(stuck)
		p50, mx := rankOfF(stuck, 50), stuck[len(stuck)-1]
		j.StuckP50Ms, j.StuckMaxMs = &p50, &mx
	}
}

// stuck is how long, at most, a's job stayed with its faulted executor.
func (v *laneView) stuck(a *jattempt, f *jfault, targets map[int]bool, applied map[string][]*jcommit) (float64, bool) {
	best := int64(math.MaxInt64)
	for _, b := range v.attempts {
		if b.job != a.job || targets[b.inst] || v.endOf(b) <= f.start {
			continue
		}
		best = min(best, max(b.start, f.start))
	}
	for _, cm := range applied[a.job] {
		landed := cm.read
		if cm.a.effType == "ok" && cm.a.effEnd >= 0 {
			landed = min(landed, cm.a.effEnd)
		}
		best = min(best, max(landed, f.start))
	}
	if best == math.MaxInt64 {
		return 0, false
	}
	return float64(best-f.start) / 1e6, true
}

// periodic works out a periodic job's figures (MODEL §20).
func (v *laneView) periodic(j *JobsTruthFigures, applied map[string][]*jcommit, whole bool) {
	jc := v.jc
	var delays []float64
	for n := v.first; n < v.first+jc.count; n++ {
		due := jc.start + int64(n-v.first)*jc.every
		if due+jc.grace > jc.stop {
			continue
		}
		cms := applied["j"+strconv.Itoa(n)]
		j.MostInPeriod = max(j.MostInPeriod, len(cms))
		onTime := false
		first := int64(-1)
		for _, cm := range cms {
			if cm.a.effInv < due+jc.every || cm.read < due+jc.every {
				onTime = true
			}
			if first < 0 || cm.a.effInv < first {
				first = cm.a.effInv
			}
		}
		if !onTime {
			j.PeriodsMissed++
		}
		if first >= 0 {
			delays = append(delays, float64(first-due)/1e6)
		}
	}
	if !whole {
		j.PeriodsMissed = -1
	}
	j.DelayP50Ms, j.DelayP99Ms = pct(delays)
	var waits []float64
	for _, t := range jc.tryOrder {
		if n, _ := strconv.Atoi(t.job[1:]); n < v.first || n >= v.first+jc.count {
			continue
		}
		j.Tries++
		recomputed := false
		for _, cm := range applied[t.job] {
			if cm.a.proc == t.proc {
				recomputed = true
			}
		}
		switch {
		case recomputed:
			continue
		case t.attempted:
			j.ServedFresh++
		default:
			j.ServedStale++
		}
		if t.end >= 0 {
			waits = append(waits, float64(t.end-t.start)/1e6)
		}
	}
	j.WaitP50Ms, j.WaitP99Ms = pct(waits)
}

// pct are the p50 and p99 by rank ⌈q·n/100⌉; none without a sample.
func pct(xs []float64) (*float64, *float64) {
	if len(xs) == 0 {
		return nil, nil
	}
	slices.Sort(xs)
	a, b := rankOfF(xs, 50), rankOfF(xs, 99)
	return &a, &b
}

func rankOfF(sorted []float64, q int) float64 {
	k := (q*len(sorted) + 99) / 100
	return sorted[max(1, k)-1]
}
