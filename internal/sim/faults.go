package sim

import (
	"fmt"
	"strings"
)

// Fault kinds the simulator applies.
const (
	fkPauseInst = "pause-instance"
	fkKillInst  = "kill-instance"
	fkKillSrv   = "kill-server"
	fkPauseSrv  = "pause-server"
	fkPartition = "partition"
	fkLatency   = "latency"
)

// What becomes of a scheduled fault.
const (
	foNormal      = "normal"
	foError       = "error"        // fault-error: could not be applied
	foNeverFired  = "never-fired"  // no mark at all
	foNeverHealed = "never-healed" // fault-start, no fault-end
	foHealFails   = "heal-fails"   // fault-end with err, the effect outlasts it
	foUnobserved  = "unobserved"   // applied, its effect not seen
	foIdleMark    = "idle-mark"    // a pause or kill marked fault-idle: it did not act
	// foMissedAim: a fault aimed at the holder (or holder-of:kN) that the
	// harness resolved to an instance holding nothing (not kN): not
	// observed, whatever its marks say (MODEL §10)
	foMissedAim = "missed-aim"
)

type faultPlan struct {
	spec    FaultSpec
	kind    string
	outcome string
	insts   []int  // instance targets (0 in the list: "holder")
	srv     string // server target
	links   []linkTarget
	add     int64 // latency added
	lingers int64 // a failed heal: the effect lasts this much longer (never: for good)
	lane    int   // its lane (MODEL §14), 0 for none
	late    bool  // scheduled to start after the stop, or to heal after it
	// aimKey: a holder-of:<key> role's key ("" for the holder role)
	aimKey string
}

// linkTarget is the link from instance inst (0: every instance) to srv.
type linkTarget struct {
	srv  string
	inst int
}

func (l linkTarget) String() string {
	if l.inst == 0 {
		return "link:" + l.srv
	}
	return fmt.Sprintf("link:%s@instance-%d", l.srv, l.inst)
}

type faultRun struct {
	doneLate bool
	p        *faultPlan
	rec      *faultRec
	links    []*linkFault
	insts    []*instance
}

func (w *world) scheduleFault(fr *faultRun) {
	at := w.t0 + fr.p.spec.At + w.uniform(0, 2e6)
	if fr.p.late {
		w.pendingLate++
	}
	w.atExact(at, func() { w.startFault(fr) })
}

// lateDone: a late fault will write no more marks; the case may end.
func (w *world) lateDone(fr *faultRun) {
	if fr.p.late && !fr.doneLate {
		fr.doneLate = true
		w.pendingLate--
		w.checkExited()
	}
}

func (w *world) startFault(fr *faultRun) { w.startFaultTry(fr, 0) }

func (w *world) startFaultTry(fr *faultRun, try int) {
	p, rec := fr.p, fr.rec
	if (w.stopping && !p.late) || w.endDone {
		return
	}
	switch p.outcome {
	case foNeverFired:
		w.lateDone(fr)
		return
	case foError:
		rec.errorIdx = w.emit(&Event{Type: "mark", F: "fault-error", Fault: p.spec.Name, Target: p.spec.Target, Err: "could not apply: permission denied"})
		w.lateDone(fr)
		return
	}
	target := p.spec.Target
	switch p.kind {
	case fkPauseInst, fkKillInst:
		var names []string
		for _, n := range p.insts {
			var in *instance
			if n == 0 {
				if p.outcome == foMissedAim {
					in = w.nonHolderInstance(p.lane, p.aimKey)
				}
				if in == nil {
					in = w.holderInstance(p.lane, p.aimKey)
				}
				if in == nil && try < 200 {
					// the harness waits for a client inside its critical section
					w.atExact(w.now+10e6, func() { w.startFaultTry(fr, try+1) })
					return
				}
				if in == nil {
					rec.errorIdx = w.emit(&Event{Type: "mark", F: "fault-error", Fault: p.spec.Name, Target: p.spec.Target, Err: "no client was inside its critical section"})
					w.lateDone(fr)
					return
				}
			} else {
				in = w.insts[n-1]
			}
			if in.dead || in.dying {
				rec.errorIdx = w.emit(&Event{Type: "mark", F: "fault-error", Fault: p.spec.Name, Target: p.spec.Target, Err: in.name() + " is not running"})
				w.lateDone(fr)
				return
			}
			fr.insts = append(fr.insts, in)
			names = append(names, fmt.Sprintf("instance-%d", in.n))
		}
		target = strings.Join(names, ",")
	}
	observed := "applied"
	switch p.kind {
	case fkPauseInst:
		observed = "every process of the group is in state T"
	case fkKillInst, fkKillSrv:
		observed = "the process exited after SIGKILL"
	}
	rec.target = target
	rec.aimed = len(p.insts) > 0 && p.insts[0] == 0
	rec.aimKey = p.aimKey
	rec.startIdx = w.emit(&Event{Type: "mark", F: "fault-start", Fault: p.spec.Name, Target: target, Observed: observed})
	effective := p.outcome != foUnobserved && p.outcome != foIdleMark
	switch p.kind {
	case fkPauseInst:
		for _, in := range fr.insts {
			rec.pauseInsts = append(rec.pauseInsts, in.n)
			if effective {
				in.paused++
			}
		}
	case fkKillInst:
		for _, in := range fr.insts {
			in := in
			rec.killInsts = append(rec.killInsts, in.n)
			if !effective {
				continue // the process kept running: nobody died (MODEL §4)
			}
			for _, c := range in.clients {
				if c.holding && c.readOK && w.cfg.resource && w.chance(0.5) {
					// a write the holder sent just before it was killed
					// lands after its death: the resource's mark counts
					// (MODEL §3), and may be damage (§17)
					c, reg, tok, sent := c, w.res[c.holdKey], c.token, w.now
					w.at(w.now+w.uniform(1e6, 40e6), func() {
						if !w.endDone {
							reg.serve(c, true, tok, w.now > sent+w.cfg.opTimeout)
						}
					})
				}
			}
			dying := w.uniform(0, w.cfg.dyingMax)
			in.die(rec.startIdx, "kill", dying)
			w.at(w.now+dying, func() { in.dead = true })
			crash := dying + w.uniform(1e6, 30e6)
			w.atExact(w.now+crash, func() {
				if w.endDone {
					return
				}
				in.rec.crashIdx = w.emit(&Event{Type: "mark", F: "crash", Proc: in.name(), Fault: p.spec.Name, Err: "signal: killed"})
				in.rec.crashFault = p.spec.Name
			})
		}
	case fkKillSrv:
		w.server(p.srv).down++
	case fkPauseSrv:
		w.server(p.srv).paused++
	case fkPartition, fkLatency:
		rec.isLink = true
		for _, l := range p.links {
			lf := &linkFault{fr: fr, srv: l.srv, inst: l.inst, partition: p.kind == fkPartition, add: p.add, inForce: true, effective: effective}
			fr.links = append(fr.links, lf)
			w.links = append(w.links, lf)
		}
		if w.cfg.malformed == "dup-start" && !w.dupStartDone && p.outcome == foNormal {
			w.dupStartDone = true
			w.at(w.now+w.uniform(1e6, 5e6), func() {
				rec.dupStartIdx = w.emit(&Event{Type: "mark", F: "fault-start", Fault: p.spec.Name, Target: target, Observed: observed})
			})
		}
	}
	if p.outcome == foNeverHealed {
		w.lateDone(fr)
		return
	}
	d := p.spec.For
	if p.kind == fkKillInst && d == 0 {
		d = w.uniform(100e3, 3e6)
	}
	w.atExact(w.now+d, func() { w.endFault(fr) })
}

func (w *world) endFault(fr *faultRun) {
	if w.endDone {
		return
	}
	p, rec := fr.p, fr.rec
	traffic := 0
	for _, lf := range fr.links {
		traffic += lf.traffic
		lf.inForce = false
	}
	switch {
	case rec.isLink && traffic == 0:
		rec.idleIdx = w.emit(&Event{Type: "mark", F: "fault-idle", Fault: p.spec.Name, Target: rec.target, Observed: "no client sent anything through " + rec.target})
	case p.outcome == foIdleMark:
		rec.idleIdx = w.emit(&Event{Type: "mark", F: "fault-idle", Fault: p.spec.Name, Target: rec.target, Observed: "nothing used " + rec.target})
	case p.outcome == foUnobserved && (rec.isLink || p.kind == fkPauseInst || p.kind == fkKillInst):
		msg := "the rules dropped nothing although traffic tried to cross"
		switch p.kind {
		case fkPauseInst:
			msg = "the process kept running (state R)"
		case fkKillInst:
			msg = "the process did not exit after SIGKILL"
		}
		rec.unobservedIdx = w.emit(&Event{Type: "mark", F: "fault-unobserved", Fault: p.spec.Name, Target: rec.target, Err: msg})
	}
	e := &Event{Type: "mark", F: "fault-end", Fault: p.spec.Name, Target: rec.target}
	if p.outcome == foHealFails {
		e.Err = "heal failed: connection refused"
		rec.healErr = true
	}
	rec.endIdx = w.emit(e)
	defer w.lateDone(fr)
	undo := func() {
		effective := p.outcome != foUnobserved && p.outcome != foIdleMark
		switch p.kind {
		case fkPauseInst:
			if effective {
				for _, in := range fr.insts {
					in.resume()
				}
			}
		case fkKillSrv:
			w.server(p.srv).down--
			if w.svc.variant == TokenReset {
				w.svc.resetTokens(p.srv)
			}
		case fkPauseSrv:
			w.server(p.srv).resume(w)
		case fkPartition, fkLatency:
			for _, lf := range fr.links {
				lf.effective = false
			}
		}
	}
	if p.outcome == foHealFails {
		if p.lingers != never {
			w.atExact(w.now+p.lingers, undo)
		}
		return
	}
	undo()
}

// holderInstance resolves the target "holder" (key ""), or
// "holder-of:<key>": the instance of a client of the lane inside its
// critical section (of key), live and not paused.
func (w *world) holderInstance(lane int, key string) *instance {
	var cands []*instance
	for _, c := range w.clients {
		if c.holding && (key == "" || c.holdKey == key) && c.in.alive() && c.in.paused == 0 && !c.in.hung && w.cfg.laneOf(c.in.n) == lane {
			cands = append(cands, c.in)
		}
	}
	if len(cands) == 0 {
		return nil
	}
	return cands[w.rng.IntN(len(cands))]
}

// nonHolderInstance: a harness that missed its aim resolves the holder
// role to an instance of the lane none of whose clients holds a key (key,
// for holder-of:<key>), live and not paused; nil when there is none.
func (w *world) nonHolderInstance(lane int, key string) *instance {
	var cands []*instance
	for _, in := range w.insts {
		if !in.alive() || in.paused > 0 || in.hung || w.cfg.laneOf(in.n) != lane {
			continue
		}
		holds := false
		for _, c := range in.clients {
			if c.holding && (key == "" || c.holdKey == key) {
				holds = true
			}
		}
		if !holds {
			cands = append(cands, in)
		}
	}
	if len(cands) == 0 {
		return nil
	}
	return cands[w.rng.IntN(len(cands))]
}
