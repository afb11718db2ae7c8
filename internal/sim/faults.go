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
	p     *faultPlan
	rec   *faultRec
	links []*linkFault
	insts []*instance
}

func (w *world) scheduleFault(fr *faultRun) {
	at := w.t0 + fr.p.spec.At + w.uniform(0, 2e6)
	w.at(at, func() { w.startFault(fr) })
}

func (w *world) startFault(fr *faultRun) { w.startFaultTry(fr, 0) }

func (w *world) startFaultTry(fr *faultRun, try int) {
	p, rec := fr.p, fr.rec
	if w.stopping || w.endDone {
		return
	}
	switch p.outcome {
	case foNeverFired:
		return
	case foError:
		rec.errorIdx = w.emit(&Event{Type: "mark", F: "fault-error", Fault: p.spec.Name, Target: p.spec.Target, Err: "could not apply: permission denied"})
		return
	}
	target := p.spec.Target
	switch p.kind {
	case fkPauseInst, fkKillInst:
		var names []string
		for _, n := range p.insts {
			var in *instance
			if n == 0 {
				in = w.holderInstance()
				if in == nil && try < 200 {
					// the harness waits for a client inside its critical section
					w.at(w.now+10e6, func() { w.startFaultTry(fr, try+1) })
					return
				}
				if in == nil {
					rec.errorIdx = w.emit(&Event{Type: "mark", F: "fault-error", Fault: p.spec.Name, Target: p.spec.Target, Err: "no client was inside its critical section"})
					return
				}
			} else {
				in = w.insts[n-1]
			}
			if in.dead || in.dying {
				rec.errorIdx = w.emit(&Event{Type: "mark", F: "fault-error", Fault: p.spec.Name, Target: p.spec.Target, Err: in.name() + " is not running"})
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
	rec.startIdx = w.emit(&Event{Type: "mark", F: "fault-start", Fault: p.spec.Name, Target: target, Observed: observed})
	effective := p.outcome != foUnobserved
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
			dying := w.uniform(0, w.cfg.dyingMax)
			in.die(rec.startIdx, "kill", dying)
			w.at(w.now+dying, func() { in.dead = true })
			crash := dying + w.uniform(1e6, 30e6)
			w.at(w.now+crash, func() {
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
		return
	}
	d := p.spec.For
	if p.kind == fkKillInst && d == 0 {
		d = w.uniform(100e3, 3e6)
	}
	w.at(w.now+d, func() { w.endFault(fr) })
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
	case p.outcome == foUnobserved && (rec.isLink || p.kind == fkPauseInst):
		msg := "the rules dropped nothing although traffic tried to cross"
		if p.kind == fkPauseInst {
			msg = "the process kept running (state R)"
		}
		rec.unobservedIdx = w.emit(&Event{Type: "mark", F: "fault-unobserved", Fault: p.spec.Name, Target: rec.target, Err: msg})
	}
	e := &Event{Type: "mark", F: "fault-end", Fault: p.spec.Name, Target: rec.target}
	if p.outcome == foHealFails {
		e.Err = "heal failed: connection refused"
		rec.healErr = true
	}
	rec.endIdx = w.emit(e)
	undo := func() {
		effective := p.outcome != foUnobserved
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
			w.at(w.now+p.lingers, undo)
		}
		return
	}
	undo()
}

// holderInstance resolves the target "holder": the instance of a client
// inside its critical section (live, not paused).
func (w *world) holderInstance() *instance {
	var cands []*instance
	for _, c := range w.clients {
		if c.holding && c.in.alive() && c.in.paused == 0 && !c.in.hung {
			cands = append(cands, c.in)
		}
	}
	if len(cands) == 0 {
		return nil
	}
	return cands[w.rng.IntN(len(cands))]
}
