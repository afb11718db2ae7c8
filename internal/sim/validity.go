package sim

import "fmt"

// This file gathers why a case is invalid (MODEL §12).

// validity gathers the reasons the case is invalid (MODEL §12) from its
// counts, faults, crashes, harness and marks; stopped says the case
// reached its stop, outOfOrder that its record is out of time order.
func (x *evalCtx) validity(t *CaseTruth) (reasons []string, stopped, outOfOrder bool) {
	cr := x.cr
	m := &cr.meta
	add := func(s string) { reasons = append(reasons, s) }
	if t.AcquiresOK == 0 {
		add("no acquire ever returned ok")
	}
	stopped = x.in(cr.stopIdx)
	for _, f := range cr.faults {
		name := f.spec.Name
		switch {
		case x.in(f.errorIdx):
			add(name + " could not be applied")
		case !x.in(f.startIdx):
			add(name + " never fired")
		default:
			if !x.in(f.endIdx) && !t.CutShort {
				add(name + " never healed")
			}
			if x.in(f.endIdx) && f.healErr {
				add(name + " could not be healed")
			}
			if x.in(f.unobservedIdx) {
				add(name + " was applied but its effect was not observed")
			}
			if x.in(f.idleIdx) && !x.excused(f) {
				add(name + " was idle")
			}
			if x.in(f.dupStartIdx) {
				add(name + " started twice (malformed)")
			}
			if x.missedAim(f) {
				add(name + " missed its aim: its target held no key at its start")
			}
			if stopped && f.startIdx > cr.stopIdx {
				add(name + " started too late (at or after the stop)")
			}
		}
	}
	for _, ir := range cr.insts {
		if !x.in(ir.crashIdx) {
			continue
		}
		if ir.deathIdx == ir.crashIdx && ir.deathKind == "crash" && !ir.crashAfterStop {
			add(fmt.Sprintf("i%d died with no kill fault", ir.n))
		}
		if stopped && ir.crashIdx > cr.stopIdx {
			add(fmt.Sprintf("i%d did not exit cleanly when the case ended", ir.n))
		}
	}
	outOfOrder = false
	for _, i := range cr.backdated {
		if x.in(i) {
			outOfOrder = true
		}
	}
	if outOfOrder {
		add("events out of order")
	}
	for _, i := range cr.earlyIdx {
		if x.in(i) {
			add("an event dated before the case start")
		}
	}
	if !stopped && !t.CutShort {
		add("no case-stop")
	}
	if stopped && x.T(cr.stopIdx) < x.T(cr.startIdx)+m.DurationNs {
		add("stopped before its duration")
	}
	for _, i := range cr.strayMarks {
		if x.in(i) {
			add("a fault mark names no scheduled fault (malformed)")
		}
	}
	for _, e := range cr.strayComps {
		if x.in(e.idx) {
			add("a completion with no operation in flight (malformed)")
		}
	}
	for _, i := range cr.afterEnd {
		if x.in(i) {
			add("an event after the case-end")
			break
		}
	}
	for _, e := range cr.outsideInst {
		if x.in(e.idx) {
			add("an event of an instance beyond the lanes")
			break
		}
	}
	for _, e := range cr.foreignKey {
		if x.in(e.idx) {
			add("a client's event on a key of another lane")
			break
		}
	}
	if x.in(cr.harnIdx) && cr.harness != nil {
		h := cr.harness
		if h.BadLines > 0 {
			add("worker output lines that were not events")
		}
		if h.EmitLagMaxNs > 1e9 {
			add("an event stuck over 1 s in a worker")
		}
		if h.CoordinatorCPU > 0.75*float64(h.Cores) {
			add("coordinator over 0.75 of the cores")
		}
		if h.CoordinatorCPU+h.WorkersCPU > 0.9*float64(h.Cores) {
			add("coordinator and workers over 0.9 of the cores")
		}
	}
	for _, e := range append(append([]ievent{}, cr.resFail...), cr.late...) {
		if x.in(e.idx) && !x.inFaultAftermath(x.T(e.idx)) {
			add("a resource request failed or arrived late outside every fault window")
			break
		}
	}
	return reasons, stopped, outOfOrder
}
