package sim

import (
	"fmt"
	"strconv"
)

// This file is a simulated job client's steps (jobsim.go): pick a job
// through the model strategy, take its lock, work, check the register,
// send the effect (the sink commits it, or not), work, record it complete,
// release; and the gates that hold a client at the phase a fault is
// aimed at.

// jobDue reports whether job n of lane l is due at t, and the job's key.
func (jc *jobCase) dueAt(n int) int64 { return jc.start + int64(n%jc.count)*jc.every }

// laneJobs are lane l's job numbers.
func (jc *jobCase) laneJobs(l int) (int, int) { return (l - 1) * jc.count, l * jc.count }

// pick is a client looking for a job through the strategy.
func (jc *jobCase) pick(c *jclient) {
	if c.stop {
		return
	}
	now := jc.w.now
	lo, hi := jc.laneJobs(c.inst.lane)
	var cands []string
	switch {
	case jc.periodic && !jc.st.queue:
		// The latest period due, done or not: a replica's timer fires.
		for n := hi - 1; n >= lo; n-- {
			if jc.dueAt(n) <= now {
				cands = []string{"j" + strconv.Itoa(n)}
				break
			}
		}
	case jc.st.queue:
		for n := lo; n < hi; n++ {
			job := "j" + strconv.Itoa(n)
			if jc.dueAt(n) > now || jc.done[job] {
				continue
			}
			if t, ok := jc.taken[job]; ok && (t < 0 || t > now) {
				continue
			}
			cands = append(cands, job)
			break // the oldest due
		}
	default:
		for n := lo; n < hi; n++ {
			job := "j" + strconv.Itoa(n)
			if jc.dueAt(n) <= now && !jc.done[job] {
				cands = append(cands, job)
			}
		}
	}
	if len(cands) == 0 || (jc.periodic && cands[0] == c.last) {
		jc.at(now+jc.think/2+jc.rng.Int64N(jc.think), c, func() { jc.pick(c) })
		return
	}
	job := cands[jc.rng.IntN(len(cands))]
	c.last = job
	if jc.st.queue {
		if jc.st.visibility > 0 {
			jc.taken[job] = now + jc.st.visibility
		} else {
			jc.taken[job] = -1
		}
	}
	if !jc.st.lock {
		jc.begin(c, job, 0)
		return
	}
	inv := now
	jc.emitObj(jc.ev("invoke", "acquire", c.proc, job))
	jc.try(c, job, inv, -1, false)
	jc.at(now+int64(1+jc.rng.IntN(2))*1e6, c, func() {
		t := jc.w.now
		l := jc.locks[job]
		if l != nil && l.holder != "" && l.expiry > t {
			jc.emitObj(jc.ev("fail", "acquire", c.proc, job).Str("err", "held"))
			jc.try(c, job, -1, t, false)
			jc.at(t+jc.think/2+jc.rng.Int64N(jc.think), c, func() { jc.pick(c) })
			return
		}
		jc.tokens[job]++
		tok := jc.tokens[job]
		jc.locks[job] = &jlock{holder: c.proc, expiry: t + jc.st.leaseNs}
		jc.emitObj(jc.ev("ok", "acquire", c.proc, job).Uint("token", tok))
		jc.try(c, job, -1, t, false)
		jc.begin(c, job, tok)
	})
}

// try notes a periodic job's try (MODEL §20): its first invoke, its last
// completion.
func (jc *jobCase) try(c *jclient, job string, inv, comp int64, attempted bool) {
	if !jc.periodic {
		return
	}
	k := c.proc + "\x00" + job
	t := jc.tries[k]
	if t == nil {
		t = &jtry{proc: c.proc, job: job, start: jc.w.now, end: -1}
		jc.tries[k] = t
		jc.tryOrder = append(jc.tryOrder, t)
	}
	if inv >= 0 {
		t.end = -1
	}
	if comp >= 0 {
		t.end = comp
	}
	t.attempted = t.attempted || attempted
}

// begin starts an attempt of job.
func (jc *jobCase) begin(c *jclient, job string, token uint64) {
	c.tried[job]++
	a := &jattempt{proc: c.proc, job: job, n: c.tried[job], inst: c.inst.n, start: jc.w.now, end: -1, effInv: -1, effEnd: -1,
		lostAt: -1, token: token, phase: "before-effect"}
	c.cur = a
	jc.attempts = append(jc.attempts, a)
	if jc.st.queue {
		jc.takenBy[job] = a
	}
	jc.emitObj(jc.ev("invoke", "job", c.proc, job).Int("attempt", a.n))
	jc.try(c, job, jc.w.now, -1, true)
	jc.at(jc.w.now+jc.before/2+jc.rng.Int64N(jc.before), c, func() { jc.beforeEffect(c, a) })
}

// beforeEffect: the work before the effect is done; the checks, then the
// effect.
func (jc *jobCase) beforeEffect(c *jclient, a *jattempt) {
	now := jc.w.now
	if jc.st.lock {
		if l := jc.locks[a.job]; l == nil || l.holder != c.proc || l.expiry <= now {
			// The library tells the resumed executor its lease is gone;
			// it goes on (abort_on_lost: false).
			if jc.rng.IntN(2) == 0 {
				a.lostAt = now
				jc.emitObj(jc.ev("ok", "lost", c.proc, a.job))
			}
		}
	}
	if jc.st.register && jc.registerDone(a.job) {
		jc.finishAttempt(c, a, "fail", "found done")
		return
	}
	if jc.gate(c, a, "before-effect", func() { jc.sendEffect(c, a) }) {
		return
	}
	jc.sendEffect(c, a)
}

// registerDone is the register's check (or the find of check-then-insert:
// an applied effect committed).
func (jc *jobCase) registerDone(job string) bool {
	if jc.st.lock {
		return jc.done[job]
	}
	return jc.applied[job] > 0
}

// gate: a fault armed for phase takes this client (MODEL §20): it waits
// there until the fault has taken effect. It reports whether it did.
func (jc *jobCase) gate(c *jclient, a *jattempt, phase string, then func()) bool {
	a.phase = phase
	for _, f := range jc.faults {
		if !f.armed || f.phase != phase || f.lane != c.inst.lane {
			continue
		}
		f.armed = false
		ts := jc.w.now + int64(1+jc.rng.IntN(3))*1e6
		leave := ts
		if jc.rng.IntN(25) == 0 {
			leave = jc.w.now // the harness let it go early: the fault may miss its aim
		}
		jc.at(ts, nil, func() { jc.startFault(f, c.inst, fmt.Sprintf("instance-%d", c.inst.n)) })
		jc.at(leave+1, c, then)
		return true
	}
	return false
}

// sendEffect sends the effect; the sink commits it after the effect's
// time (or never, sometimes), and answers.
func (jc *jobCase) sendEffect(c *jclient, a *jattempt) {
	a.effInv = jc.w.now
	a.phase = "during-effect"
	jc.emitObj(jc.ev("invoke", "effect", c.proc, a.job).Int("attempt", a.n).Uint("token", a.token))
	jc.at(jc.w.now+jc.effect, c, func() {
		if jc.gate(c, a, "during-effect", func() { jc.commit(c, a) }) {
			return
		}
		jc.commit(c, a)
	})
}

// commit is the sink committing the effect (or its transaction lost).
func (jc *jobCase) commit(c *jclient, a *jattempt) {
	now := jc.w.now
	if jc.rng.IntN(20) == 0 {
		// The transaction never committed: unknown to the client.
		jc.at(now+2e6, c, func() {
			a.effEnd, a.effType = jc.w.now, "info"
			jc.emitObj(jc.ev("info", "effect", c.proc, a.job).Int("attempt", a.n).Uint("token", a.token).Str("err", "timeout"))
			jc.finishAttempt(c, a, "info", "effect of unknown outcome")
		})
		return
	}
	outcome := "applied"
	switch {
	case jc.st.keyed && jc.applied[a.job] > 0:
		outcome = "duplicate"
	case jc.st.fenced && a.token < jc.fenceHi[a.job]:
		outcome = "stale"
	}
	if outcome == "applied" {
		jc.applied[a.job]++
		if jc.st.fenced {
			jc.fenceHi[a.job] = max(jc.fenceHi[a.job], a.token)
		}
	}
	cm := &jcommit{a: a, t: now, outcome: outcome, read: -1, seq: len(jc.commits)}
	a.commit = cm
	jc.commits = append(jc.commits, cm)
	lost := jc.rng.IntN(15) == 0 // the answer never came back
	jc.at(now+int64(1+jc.rng.IntN(2))*1e6, c, func() {
		a.effEnd = jc.w.now
		a.phase = "after-effect"
		o := jc.ev("ok", "effect", c.proc, a.job).Int("attempt", a.n).Uint("token", a.token)
		switch {
		case lost:
			a.effType = "info"
			jc.emitObj(jc.ev("info", "effect", c.proc, a.job).Int("attempt", a.n).Uint("token", a.token).Str("err", "timeout"))
			jc.finishAttempt(c, a, "info", "effect of unknown outcome")
			return
		case outcome == "stale":
			a.effType = "fail"
			jc.emitObj(jc.ev("fail", "effect", c.proc, a.job).Int("attempt", a.n).Uint("token", a.token).Str("outcome", outcome))
			jc.finishAttempt(c, a, "fail", "stale")
			return
		case outcome == "duplicate":
			a.effType = "fail"
			o = jc.ev("fail", "effect", c.proc, a.job).Int("attempt", a.n).Uint("token", a.token)
		default:
			a.effType = "ok"
		}
		jc.emitObj(o.Str("outcome", outcome))
		next := func() {
			jc.at(jc.w.now+jc.after, c, func() {
				if jc.rng.IntN(25) == 0 {
					jc.finishAttempt(c, a, "info", "complete: timeout")
					return
				}
				jc.done[a.job] = true
				jc.finishAttempt(c, a, "ok", "")
			})
		}
		if jc.gate(c, a, "after-effect", next) {
			return
		}
		next()
	})
}

// end ends an attempt: its completion, the lock's release, the next pick.
func (jc *jobCase) finishAttempt(c *jclient, a *jattempt, typ, why string) {
	a.end, a.endType = jc.w.now, typ
	c.cur = nil
	o := jc.ev(typ, "job", c.proc, a.job).Int("attempt", a.n)
	if why != "" {
		o.Str("err", why)
	}
	jc.emitObj(o)
	jc.try(c, a.job, -1, jc.w.now, true)
	if jc.st.queue && jc.takenBy[a.job] == a {
		if typ != "ok" && jc.st.visibility == 0 {
			delete(jc.taken, a.job) // rolled back: the job is free again
		}
	}
	if jc.st.lock {
		jc.emitObj(jc.ev("invoke", "release", c.proc, a.job))
		l := jc.locks[a.job]
		jc.at(jc.w.now+1e6, c, func() {
			if l != nil && l.holder == c.proc && l.expiry > jc.w.now {
				l.holder = ""
				jc.emitObj(jc.ev("ok", "release", c.proc, a.job))
			} else {
				jc.emitObj(jc.ev("fail", "release", c.proc, a.job).Str("err", "not held"))
			}
			jc.at(jc.w.now+jc.think/2+jc.rng.Int64N(jc.think), c, func() { jc.pick(c) })
		})
		return
	}
	jc.at(jc.w.now+jc.think/2+jc.rng.Int64N(jc.think), c, func() { jc.pick(c) })
}
