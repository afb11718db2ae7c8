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
	for n := 1; n <= cfg.instances; n++ {
		in := &instance{w: w, n: n, rec: &instRec{n: n, deathIdx: -1, crashIdx: -1}}
		for m := 0; m < cfg.clientsPer; m++ {
			c := &client{w: w, name: fmt.Sprintf("i%dc%d", n, m), in: in, lastGrant: map[string]int64{}}
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
	w.at(stop, w.stop)
	w.scheduleInjections()
	w.loop()
	return cr
}

func (w *world) stop() {
	if w.cfg.stopMode != "none" {
		w.stopIdx = w.emit(&Event{Type: "mark", F: "case-stop"})
		w.cr.stopIdx = w.stopIdx
		for _, c := range w.clients {
			c.endWaitAtStop(w.stopIdx)
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
			w.at(w.now+w.uniform(50e6, 300e6), func() { w.harnessKill(in, "did not stop within its time of being asked to: killed by the harness") })
		}
	}
	cf := w.cfg
	limit := cf.acquireTimeout + cf.holdMax + 2*cf.lease + 6*cf.opTimeout + 1e9
	w.at(w.now+limit, func() {
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
	if !w.stopping || w.endDone {
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
	w.now += w.uniform(1e6, 5e6)
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
	w.now += w.uniform(100e3, 2e6)
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
		w.at(at(0.2, 0.7), func() {
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
			e := &Event{T: t, Type: "ok", F: "dropped", Proc: in.name(), Intended: max(t-w.uniform(1, 1e6), 1)}
			w.run.Events = append(w.run.Events, e)
			idx := len(w.run.Events) - 1
			if cf.backdate == "early" {
				w.cr.earlyIdx = append(w.cr.earlyIdx, idx)
			}
			w.cr.backdated = append(w.cr.backdated, idx)
		})
	case "op":
		w.at(at(0.1, 0.9), func() { w.backdateNext = true })
	}
	switch cf.malformed {
	case "stray-mark":
		w.at(at(0.1, 0.9), func() {
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
					w.cr.strayComps = append(w.cr.strayComps, c.emit(&Event{Type: "ok", F: "extend", Key: c.holdKey}))
					return
				}
			}
			w.at(w.now+w.uniform(1e6, 20e6), try)
		}
		w.at(at(0.1, 0.8), try)
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
