package sim

import (
	"fmt"
	"math/rand/v2"
)

// simulateCase runs one case from t0, appending its events to r.Events.
func (r *Run) simulateCase(cfg *caseConfig, t0 int64) *caseRec {
	w := &world{
		rng: rand.New(rand.NewPCG(cfg.seed, 0x10cbe4c4)),
		run: r, cfg: cfg, t0: t0, now: t0, stopIdx: -1,
	}
	cr := &caseRec{cfg: cfg, meta: cfg.meta(), startIdx: -1, stopIdx: -1, endIdx: -1, harnIdx: -1}
	w.cr = cr
	w.svc = &service{w: w, variant: cfg.variant, lease: cfg.lease, fenced: cfg.fenced,
		freeOnDeath: cfg.freeOnDeath, notify: cfg.notify, noExpiry: cfg.variant == NoExpiry,
		misP: cfg.misP, locks: map[string]*lockEntry{}, counter: map[string]uint64{}}
	if cfg.blocked {
		// Every key is held by a client of an earlier run that nobody
		// will ever release: no acquire can succeed.
		for _, k := range cfg.keyNames() {
			w.svc.locks[k] = &lockEntry{holder: "i99c0", inst: 99, expires: never}
		}
		w.svc.noExpiry = true
	}
	w.res = map[string]*register{}
	for _, k := range cfg.keyNames() {
		w.res[k] = &register{w: w, key: k, reads: map[string]readState{}}
	}
	if cfg.variant == TokenReset {
		// a silent failover to a replica whose counter lags
		for i := 0; i < 1+w.rng.IntN(2); i++ {
			srv := fmt.Sprintf("srv-%d", 1+w.rng.IntN(cfg.servers))
			w.at(t0+int64(float64(cfg.duration)*(0.2+0.6*w.rng.Float64())), func() { w.svc.resetTokens(srv) })
		}
	}
	for n := 1; n <= cfg.totalInstances(); n++ {
		in := &instance{w: w, n: n, rec: &instRec{n: n, deathIdx: -1, crashIdx: -1}}
		for m := 0; m < cfg.clientsPer; m++ {
			c := &client{w: w, name: fmt.Sprintf("i%dc%d", n, m), in: in, lane: cfg.laneOf(n), ord: len(w.clients), lastGrant: map[string]int64{}}
			in.clients = append(in.clients, c)
			w.clients = append(w.clients, c)
		}
		w.insts = append(w.insts, in)
		cr.insts = append(cr.insts, in.rec)
	}
	cr.startIdx = w.emit(&Event{Type: "mark", F: "case-start", Meta: cr.meta.encode()})
	for _, p := range cfg.faults {
		fr := &faultRun{p: p, rec: &faultRec{spec: p.spec, startIdx: -1, endIdx: -1, errorIdx: -1, unobservedIdx: -1, idleIdx: -1, dupStartIdx: -1}}
		cr.faults = append(cr.faults, fr.rec)
		w.faults = append(w.faults, fr)
		w.scheduleFault(fr)
	}
	for _, c := range w.clients {
		c.start()
	}
	stop := t0 + cfg.duration + w.uniform(0, 3e6)
	if cfg.stopMode == "early" {
		stop = t0 + int64(float64(cfg.duration)*(0.3+0.5*w.rng.Float64()))
	}
	w.atExact(stop, w.stop)
	w.scheduleInjections()
	w.loop()
	cr.lastIdx = len(r.Events) - 1
	if cr.endIdx >= 0 {
		cr.lastIdx = cr.endIdx
	}
	if cfg.afterEnd && cr.endIdx >= 0 {
		w.eventAfterEnd()
	}
	return cr
}

// eventAfterEnd writes an event after the case-end: it belongs to no
// case, and makes the case it follows invalid (MODEL §2).
func (w *world) eventAfterEnd() {
	c := w.clients[w.rng.IntN(len(w.clients))]
	w.now += w.uniform(100e3, 3e6)
	key := w.cfg.laneKeys(c.lane)[0]
	var e *Event
	switch w.rng.IntN(4) {
	case 0:
		e = &Event{Type: "ok", F: "lost", Proc: c.name, Key: key}
	case 1:
		e = &Event{Type: "mark", F: "res-read", Proc: c.name, Key: key, Fenced: "accepted"}
	case 2:
		e = &Event{Type: "invoke", F: "acquire", Proc: c.name, Key: key}
	default:
		e = &Event{Type: "ok", F: "release", Proc: c.name, Key: key}
	}
	w.cr.afterEnd = append(w.cr.afterEnd, w.emit(e))
}

func (w *world) stop() {
	if w.cfg.stopMode != "none" {
		w.stopIdx = w.emit(&Event{Type: "mark", F: "case-stop"})
		w.cr.stopIdx = w.stopIdx
		for _, c := range w.clients {
			c.endWaitAtStop(w.stopIdx)
		}
		for _, wr := range w.extraWaits {
			if wr.endIdx < 0 {
				wr.endIdx, wr.endKind = w.stopIdx, "stop"
			}
		}
	}
	w.stopping = true
	if w.cfg.hangAtStop {
		var cands []*instance
		for _, in := range w.insts {
			if in.alive() && in.paused == 0 {
				cands = append(cands, in)
			}
		}
		if len(cands) > 0 {
			in := cands[w.rng.IntN(len(cands))]
			in.hung = true
			w.atExact(w.now+w.uniform(50e6, 300e6), func() { w.harnessKill(in, "did not stop within its time of being asked to: killed by the harness") })
		}
	}
	cf := w.cfg
	limit := cf.acquireTimeout + cf.holdMax + 2*cf.lease + 6*cf.opTimeout + 1e9
	w.atExact(w.now+limit, func() {
		for _, in := range w.insts {
			if !in.alive() {
				continue
			}
			for _, c := range in.clients {
				if !c.exited {
					w.harnessKill(in, "did not stop in time: killed by the harness")
					break
				}
			}
		}
	})
	w.checkExited()
}

// harnessKill: the harness kills an instance that did not stop.
func (w *world) harnessKill(in *instance, why string) {
	if w.endDone || !in.alive() {
		return
	}
	idx := w.emit(&Event{Type: "mark", F: "crash", Proc: in.name(), Err: why})
	in.rec.crashIdx = idx
	in.rec.crashAfterStop = w.stopping
	in.die(idx, "crash", 0)
	in.dead = true
	w.checkExited()
}

func (w *world) checkExited() {
	if !w.stopping || w.endDone || w.pendingLate > 0 {
		return
	}
	for _, c := range w.clients {
		if !c.exited && !c.in.dead && !c.in.dying {
			return
		}
	}
	w.endDone = true
	// let the last replies land: the coordinator writes its closing marks
	// a little later.
	w.now = w.offGrid(w.now + w.uniform(1e6, 5e6))
	w.finish()
}

func (w *world) finish() {
	cf := w.cfg
	if cf.harness != "" {
		h := &HarnessStats{EmitLagMaxNs: w.uniform(1e6, 200e6), CoordinatorCPU: 0.1 + float64(w.rng.IntN(30))/100, WorkersCPU: 0.2 + float64(w.rng.IntN(40))/100, Cores: 2}
		switch cf.harness {
		case "bad-lines":
			h.BadLines = 1 + w.rng.IntN(5)
		case "emit-lag":
			h.EmitLagMaxNs = w.uniform(1200e6, 3e9)
		case "coord-cpu":
			h.CoordinatorCPU = 1.6 + float64(w.rng.IntN(30))/100
		case "total-cpu":
			h.CoordinatorCPU, h.WorkersCPU = 0.6, 1.3+float64(w.rng.IntN(50))/100
		}
		w.cr.harness = h
		w.cr.harnIdx = w.emit(&Event{Type: "mark", F: "harness", Meta: h.encode()})
	}
	w.now = w.offGrid(w.now + w.uniform(100e3, 2e6))
	if cf.noCaseEnd {
		// no case-end: the case runs until the next case-start, cut
		// short (MODEL §2); its holds stay in force to its end
		return
	}
	idx := w.emit(&Event{Type: "mark", F: "case-end"})
	w.cr.endIdx = idx
	for _, c := range w.clients {
		if c.in.rec.deathIdx < 0 {
			c.endAll(idx, "end")
		}
	}
}

// scheduleInjections schedules the case's validity problems (MODEL §12)
// that are not faults.
func (w *world) scheduleInjections() {
	cf := w.cfg
	d := cf.duration
	at := func(lo, hi float64) int64 { return w.t0 + int64(float64(d)*(lo+(hi-lo)*w.rng.Float64())) }
	if cf.unexplainedCrash {
		w.atExact(at(0.2, 0.7), func() {
			var cands []*instance
			for _, in := range w.insts {
				if in.alive() {
					cands = append(cands, in)
				}
			}
			if len(cands) < 2 {
				return
			}
			in := cands[w.rng.IntN(len(cands))]
			idx := w.emit(&Event{Type: "mark", F: "crash", Proc: in.name(), Err: "exit status 2"})
			in.rec.crashIdx = idx
			in.die(idx, "crash", 0)
			in.dead = true
		})
	}
	switch cf.backdate {
	case "inert", "early":
		w.at(at(0.1, 0.9), func() {
			if w.stopping {
				return
			}
			var t int64
			if cf.backdate == "early" {
				t = w.t0 - w.uniform(1, 1e6)
			} else {
				t = w.run.lastT - w.uniform(1, min(5e6, w.run.lastT-w.t0-1))
			}
			in := w.insts[w.rng.IntN(len(w.insts))]
			if !in.alive() {
				// a dead instance writes nothing (whether its events
				// would be posthumous is not what this tests)
				for _, o := range w.insts {
					if o.alive() {
						in = o
						break
					}
				}
			}
			e := &Event{T: t, Type: "ok", F: "dropped", Proc: in.name(), Intended: max(t-w.uniform(1, 1e6), 1)}
			w.run.Events = append(w.run.Events, e)
			idx := len(w.run.Events) - 1
			if cf.backdate == "early" {
				w.cr.earlyIdx = append(w.cr.earlyIdx, idx)
			}
			w.cr.dropped = append(w.cr.dropped, ievent{idx: idx, inst: in.n})
			w.cr.backdated = append(w.cr.backdated, idx)
		})
	case "op":
		w.at(at(0.1, 0.9), func() { w.backdateNext = true })
	}
	switch cf.malformed {
	case "stray-mark":
		w.atExact(at(0.1, 0.9), func() {
			if w.stopping {
				return
			}
			w.cr.strayMarks = append(w.cr.strayMarks, w.emit(&Event{Type: "mark", F: "fault-idle", Fault: "ghost-fault", Target: "link:srv-9"}))
		})
	case "stray-completion":
		var try func()
		try = func() {
			if w.stopping {
				return
			}
			for _, c := range w.clients {
				if c.holding && c.op == nil && c.recording() && c.in.paused == 0 && !c.in.hung {
					w.cr.strayComps = append(w.cr.strayComps, ievent{c.emit(&Event{Type: "ok", F: "extend", Key: c.holdKey}), c.in.n, c.holdKey})
					return
				}
			}
			w.at(w.now+w.uniform(1e6, 20e6), try)
		}
		w.at(at(0.1, 0.8), try)
	}
	if cf.outsideInst {
		// an instance beyond the lanes acquires a key, and fails: judged in
		// the lane of its key, which it makes invalid, or, on a key of no
		// lane, judged nowhere and every lane invalid (MODEL §14). Its
		// client then waits for the key until the stop (§11).
		key := "k0"
		if w.rng.IntN(3) == 0 {
			key = fmt.Sprintf("k%d", cf.keys*cf.lanes)
		}
		w.at(at(0.2, 0.8), func() {
			if w.stopping {
				return
			}
			n := cf.totalInstances() + 1
			p := fmt.Sprintf("i%dc0", n)
			inv := w.emit(&Event{Type: "invoke", F: "acquire", Proc: p, Key: key})
			w.cr.outsideInst = append(w.cr.outsideInst, ievent{inv, n, key})
			op := &opRec{id: len(w.cr.ops), client: p, inst: n, kind: "acquire", key: key, invIdx: inv, compIdx: -1}
			w.cr.ops = append(w.cr.ops, op)
			wr := &waitRec{client: p, inst: n, key: key, beginIdx: inv, endIdx: -1}
			w.cr.waits = append(w.cr.waits, wr)
			w.extraWaits = append(w.extraWaits, wr)
			w.at(w.now+w.uniform(1e6, 5e6), func() {
				comp := w.emit(&Event{Type: "fail", F: "acquire", Proc: p, Key: key, Err: "lock is held by another client"})
				op.compIdx, op.outcome = comp, "fail"
				w.cr.outsideInst = append(w.cr.outsideInst, ievent{comp, n, key})
			})
		})
	}
	if cf.foreignKey && cf.lanes > 1 {
		// a client reads the resource of a key of another lane (MODEL
		// §14: its own lane invalid); a read the resource let through
		// changes no count
		w.at(at(0.2, 0.8), func() {
			if w.stopping {
				return
			}
			for _, c := range w.clients {
				if !c.recording() || c.in.paused > 0 || c.in.hung {
					continue
				}
				other := c.lane%cf.lanes + 1
				key := cf.laneKeys(other)[0]
				idx := c.emit(&Event{Type: "mark", F: "res-read", Key: key, Token: c.token, Fenced: "accepted"})
				w.cr.foreignKey = append(w.cr.foreignKey, ievent{idx, c.in.n, key})
				return
			}
		})
	}
	if cf.resFailOutside || cf.lateOutside {
		t := w.quietTime()
		if t >= 0 {
			w.at(t, func() {
				if w.stopping {
					return
				}
				if cf.lateOutside {
					w.slowResource = true
					return
				}
				for _, c := range w.clients {
					if c.recording() && c.in.paused == 0 && !c.in.hung {
						c.resourceFailed("resource write: connection reset by peer")
						return
					}
				}
			})
		}
	}
}

// quietTime picks an instant far from every scheduled fault and its
// aftermath, or -1.
func (w *world) quietTime() int64 {
	cf := w.cfg
	after := cf.opTimeout + 1e9
	for try := 0; try < 50; try++ {
		t := w.uniform(w.t0+100e6, w.t0+cf.duration-300e6)
		ok := true
		for _, p := range cf.faults {
			s := w.t0 + p.spec.At - 50e6
			e := w.t0 + p.spec.At + p.spec.For + after + 1500e6 // a failed heal may linger
			if p.outcome == foNeverHealed {
				e = never
			}
			if t >= s && t <= e {
				ok = false
			}
		}
		if ok {
			return t
		}
	}
	return -1
}
