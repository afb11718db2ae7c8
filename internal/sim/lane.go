package sim

import "fmt"

// Side-by-side trials (MODEL §14): a case with lanes is judged lane by
// lane, each lane as a case of its own: its clients' and instances'
// records, its faults, and the case's own marks (start, stop, end,
// harness). views splits a case's records so; a case without lanes is its
// own single view.

// views returns the cases the checker judges in this one: the case
// itself, or one view per lane.
func (cr *caseRec) views() []*caseRec {
	cfg := cr.cfg
	if cfg.lanes == 0 {
		v := *cr
		v.keys = cfg.keyNames()
		return []*caseRec{&v}
	}
	var out []*caseRec
	for l := 1; l <= cfg.lanes; l++ {
		out = append(out, cr.laneView(l))
	}
	return out
}

func (cr *caseRec) laneView(l int) *caseRec {
	cfg := cr.cfg
	in := func(inst int) bool { return cfg.laneOf(inst) == l }
	// an event that names a key belongs to the lane of its key (the lock
	// is per key), any other of a client or an instance to the lane of its
	// instance (MODEL §14)
	ofKey := func(key string) bool { return cfg.keyLane(key) == l }
	v := &caseRec{cfg: cfg, meta: cr.meta, startIdx: cr.startIdx, stopIdx: cr.stopIdx, endIdx: cr.endIdx, lastIdx: cr.lastIdx,
		harness: cr.harness, harnIdx: cr.harnIdx, lane: l, keys: cfg.laneKeys(l), laned: cr,
		strayMarks: cr.strayMarks, backdated: cr.backdated, backdatedOp: cr.backdatedOp, earlyIdx: cr.earlyIdx,
		afterEnd: cr.afterEnd, misbehaved: cr.misbehaved, misbehavior: cr.misbehavior,
		thresholds: cr.thresholds}
	v.meta.Trial = cr.meta.Trial + l - 1
	v.meta.Name = fmt.Sprintf("%s.t%d", cr.meta.Row, v.meta.Trial)
	v.meta.Faults = nil
	for _, op := range cr.ops {
		if ofKey(op.key) {
			v.ops = append(v.ops, op)
		}
	}
	for _, h := range cr.holds {
		if ofKey(h.key) {
			v.holds = append(v.holds, h)
		}
	}
	for _, w := range cr.waits {
		if ofKey(w.key) {
			v.waits = append(v.waits, w)
		}
	}
	for _, lr := range cr.losts {
		if ofKey(lr.key) {
			v.losts = append(v.losts, lr)
		}
	}
	for _, ir := range cr.insts {
		if in(ir.n) {
			v.insts = append(v.insts, ir)
		}
	}
	for _, f := range cr.faults {
		if f.spec.Lane == l {
			v.faults = append(v.faults, f)
			v.meta.Faults = append(v.meta.Faults, f.spec)
		}
	}
	for _, r := range cr.res {
		if ofKey(r.key) {
			v.res = append(v.res, r)
		}
	}
	for _, a := range cr.applied {
		if ofKey(a.op.key) {
			v.applied = append(v.applied, a)
		}
	}
	pick := func(es []ievent) []ievent {
		var o []ievent
		for _, e := range es {
			if (e.key != "" && ofKey(e.key)) || (e.key == "" && (e.inst == 0 || in(e.inst))) {
				o = append(o, e)
			}
		}
		return o
	}
	v.resFail, v.late, v.strayComps, v.dropped = pick(cr.resFail), pick(cr.late), pick(cr.strayComps), pick(cr.dropped)
	// a client's event on another lane's key is judged in the key's lane
	// and makes both lanes invalid; one of an instance beyond the lanes
	// makes the lane of its key invalid, every lane on a key of no lane
	for _, e := range cr.foreignKey {
		if ofKey(e.key) || in(e.inst) {
			v.foreignKey = append(v.foreignKey, e)
		}
	}
	for _, e := range cr.outsideInst {
		if ofKey(e.key) || cfg.keyLane(e.key) == 0 {
			v.outsideInst = append(v.outsideInst, e)
		}
	}
	return v
}

// inst is the record of instance n.
func (cr *caseRec) inst(n int) *instRec {
	for _, ir := range cr.insts {
		if ir.n == n {
			return ir
		}
	}
	return nil
}
