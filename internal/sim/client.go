package sim

// client is one closed-loop client i<N>c<M>: think, acquire (retrying
// inside one operation until its acquire timeout), hold (reading and
// writing the protected resource, extending), release.
type client struct {
	w       *world
	name    string
	in      *instance
	lane    int
	ord     int // its place among the case's clients
	exited  bool
	started bool

	// the lock operation in flight
	op             *opRec
	attempt        int
	unknownAttempt bool
	// answered: the service refused an attempt (it said so: a fail,
	// not an unsent, when nothing may have taken effect)
	answered  bool
	deadline  int64
	tgen      int
	reentrant bool

	wait *waitRec

	// what the client believes
	holding     bool
	hold        *holdRec
	holdKey     string
	holdGen     int
	validUntil  int64
	wantRelease bool
	wrongDone   bool
	readOK      bool
	lostPending bool
	lastGrant   map[string]int64
	rgen        int
	token       uint64
}

func (c *client) cfg() *caseConfig { return c.w.cfg }

// recording: the client's events still mean something (MODEL §3: events
// after its instance's death are posthumous).
func (c *client) recording() bool { return !c.in.dying && !c.in.dead }

func (c *client) emit(e *Event) int {
	e.Proc = c.name
	return c.w.emit(e)
}

func (c *client) invoke(kind, key string) *opRec {
	w := c.w
	idx := c.emit(&Event{Type: "invoke", F: kind, Key: key})
	op := &opRec{id: len(w.cr.ops), client: c.name, inst: c.in.n, kind: kind, key: key, invIdx: idx, compIdx: -1}
	if !c.recording() {
		op.postInv = true
		return op
	}
	w.cr.ops = append(w.cr.ops, op)
	switch kind {
	case "acquire":
		if w.stopping {
			break
		}
		if c.wait != nil && c.wait.key != key {
			c.wait.endIdx, c.wait.endKind = idx, "other-key"
			c.wait = nil
		}
		if c.wait == nil {
			c.wait = &waitRec{client: c.name, inst: c.in.n, key: key, beginIdx: idx, endIdx: -1}
			w.cr.waits = append(w.cr.waits, c.wait)
		}
	case "release":
		if c.holding && c.holdKey == key {
			if c.hold != nil {
				c.hold.endIdx, c.hold.endKind, c.hold.rel = idx, "release", op
				op.hold = c.hold
			}
			c.dropHold()
		}
	}
	return op
}

func (c *client) complete(op *opRec, outcome string, token uint64, err string) {
	e := &Event{Type: outcome, F: op.kind, Key: op.key, Token: token, Err: err}
	e.TokenZero = c.cfg().tokenZero && outcome == "ok" && op.kind == "acquire"
	idx := c.emit(e)
	if op.postInv {
		return
	}
	op.compIdx, op.outcome, op.token = idx, outcome, token
	if !c.recording() {
		op.postComp = true
	}
}

func (c *client) dropHold() {
	c.holding = false
	c.hold = nil
	c.holdGen++
}

// endAll ends the client's hold and wait at event idx (its instance died,
// or the case ended).
func (c *client) endAll(idx int, kind string) {
	if c.holding && c.hold != nil {
		c.hold.endIdx, c.hold.endKind = idx, kind
		c.hold = nil
	}
	if c.wait != nil && kind == "death" {
		c.wait.endIdx, c.wait.endKind = idx, kind
		c.wait = nil
	}
}

func (c *client) endWaitAtStop(idx int) {
	if c.wait != nil {
		c.wait.endIdx, c.wait.endKind = idx, "stop"
		c.wait = nil
	}
}

// --- the loop ------------------------------------------------------------

func (c *client) start() {
	c.started = true
	w := c.w
	w.instAt(w.now+w.uniform(0, 20e6), c.in, c.think)
}

func (c *client) exit() {
	if c.exited {
		return
	}
	c.exited = true
	c.w.checkExited()
}

func (c *client) think() {
	w := c.w
	if w.stopping {
		c.exit()
		return
	}
	w.instAt(w.now+w.uniform(c.cfg().thinkMin, c.cfg().thinkMax), c.in, c.beginAcquire)
}

func (c *client) beginAcquire() {
	w := c.w
	if w.stopping {
		c.exit()
		return
	}
	keys := c.cfg().laneKeys(c.lane)
	key := keys[w.rng.IntN(len(keys))]
	if c.cfg().ownKeys {
		key = keys[c.ord%len(keys)]
	}
	if p := c.cfg().strangerWrongP; p > 0 && w.chance(p) {
		// a client that holds nothing releases a key with a lease value
		// not its own (MODEL §6 rule 4 when the service accepts it)
		op := c.invoke("release-wrong-token", key)
		c.op = op
		c.simpleOp(op, func(r string) string {
			if r == "released" {
				return "ok"
			}
			return "fail"
		}, "lock is held with another token", c.think)
		return
	}
	c.startAcquire(key, false)
}

func (c *client) startAcquire(key string, reentrant bool) {
	w := c.w
	op := c.invoke("acquire", key)
	c.op = op
	c.reentrant = reentrant
	c.attempt = 0
	c.unknownAttempt = false
	c.answered = false
	timeout := c.cfg().acquireTimeout
	if reentrant {
		timeout = c.cfg().opTimeout
	}
	c.deadline = w.now + timeout
	c.sendAttempt()
}

func (c *client) sendAttempt() {
	w := c.w
	c.attempt++
	a, op := c.attempt, c.op
	srv := w.serverOf(op.key)
	if c.notSent(srv) {
		c.tgen++
		g := c.tgen
		w.instAt(w.now+w.uniform(20e3, 500e3), c.in, func() { c.onAttemptRefused(op, a, g) })
		return
	}
	w.request(c.in, srv, func() {
		res, gi := w.svc.acquire(c, op, a)
		if res == "queued" {
			return // the service replies when it grants, or refuses at the end of the wait
		}
		w.reply(c.in, srv, 0, func() { c.onAcquireReply(op, a, res, gi) })
	})
	c.tgen++
	g := c.tgen
	t := min(w.now+c.cfg().opTimeout, c.deadline)
	w.instAt(t, c.in, func() { c.onAttemptTimeout(op, a, g) })
}

func (c *client) onAcquireReply(op *opRec, a int, res string, gi grantInfo) {
	if c.op != op || a != c.attempt {
		return
	}
	c.tgen++
	w := c.w
	if res == "granted" {
		op.okAttempt = a
		c.finishAcquire("ok", gi, "")
		return
	}
	c.answered = true
	if c.reentrant {
		c.finishAcquire(c.failOrInfo(), gi, "lock is held by another client")
		return
	}
	b := c.backoff()
	if w.now+b >= c.deadline {
		c.finishAcquire(c.failOrInfo(), gi, "lock is held by another client")
		return
	}
	w.instAt(w.now+b, c.in, func() {
		if c.op == op && c.attempt == a {
			c.sendAttempt()
		}
	})
}

// failOrInfo: an acquire that gave up is a certain failure only when no
// attempt of it may have taken effect: refused by the service when one
// attempt reached it, unsent when none was ever sent (MODEL A1).
func (c *client) failOrInfo() string {
	switch {
	case c.unknownAttempt:
		return "info"
	case c.answered:
		return "fail"
	}
	return "unsent"
}

// errNotSent is the error of a request never sent.
const errNotSent = "dial tcp: connect: connection refused"

// notSent: the request to srv is never sent: the client's own check
// refuses it (unsentP), or a partition refuses the dial (refuseDials).
func (c *client) notSent(srv string) bool {
	if p := c.cfg().unsentP; p > 0 && c.w.chance(p) {
		return true
	}
	return c.w.refusedDial(c.in, srv)
}

// onAttemptRefused: an attempt that was never sent; the acquire backs off
// and tries again until its deadline, as after a refusal.
func (c *client) onAttemptRefused(op *opRec, a, g int) {
	if c.op != op || a != c.attempt || g != c.tgen {
		return
	}
	c.tgen++
	w := c.w
	b := c.backoff()
	if c.reentrant || w.now+b >= c.deadline {
		c.finishAcquire(c.failOrInfo(), grantInfo{}, errNotSent)
		return
	}
	w.instAt(w.now+b, c.in, func() {
		if c.op == op && c.attempt == a {
			c.sendAttempt()
		}
	})
}

func (c *client) backoff() int64 {
	cf := c.cfg()
	d := cf.retryBase << min(c.attempt, 6)
	if d > cf.retryMax {
		d = cf.retryMax
	}
	return d/2 + c.w.uniform(0, d/2)
}

func (c *client) onAttemptTimeout(op *opRec, a, g int) {
	if c.op != op || g != c.tgen {
		return
	}
	c.unknownAttempt = true
	w := c.w
	if w.now >= c.deadline || c.reentrant {
		c.finishAcquire("info", grantInfo{}, "context deadline exceeded")
		return
	}
	c.sendAttempt()
}

func (c *client) finishAcquire(outcome string, gi grantInfo, err string) {
	op := c.op
	c.op = nil
	c.tgen++
	if outcome != "ok" {
		gi.token = 0
	} else {
		err = ""
	}
	c.complete(op, outcome, gi.token, err)
	reentrant := c.reentrant
	c.reentrant = false
	if outcome == "ok" {
		c.lastGrant[op.key] = gi.grant
		c.token = gi.token
		if c.recording() && c.wait != nil && c.wait.key == op.key {
			c.wait.endIdx, c.wait.endKind = op.compIdx, "ok"
			c.wait = nil
		}
		if c.holding && c.holdKey == op.key {
			op.dup = c.recording()
			op.hold = c.hold
			if c.cfg().validityTimer {
				c.validUntil = c.w.run.Events[op.invIdx].T + c.cfg().lease - c.cfg().validityMargin
			}
		} else {
			c.beginHold(op)
			return
		}
	}
	if reentrant {
		c.holdContinue()
		return
	}
	c.think()
}

// --- holding -------------------------------------------------------------

func (c *client) beginHold(op *opRec) {
	w, cf := c.w, c.cfg()
	c.holding = true
	c.holdKey = op.key
	c.hold = nil
	if c.recording() {
		c.hold = &holdRec{client: c.name, inst: c.in.n, key: op.key, beginIdx: op.compIdx, endIdx: -1, acq: op}
		op.hold = c.hold
		w.cr.holds = append(w.cr.holds, c.hold)
	}
	c.holdGen++
	g := c.holdGen
	c.wantRelease, c.wrongDone, c.readOK, c.lostPending = false, false, false, false
	if cf.validityTimer && cf.lease > 0 {
		c.validUntil = w.run.Events[op.invIdx].T + cf.lease - cf.validityMargin
		w.instAt(c.validUntil, c.in, func() { c.checkValidity(g) })
	}
	dur := w.uniform(cf.holdMin, cf.holdMax)
	if cf.longHoldP > 0 && w.chance(cf.longHoldP) {
		dur = cf.lease + w.uniform(cf.lease/4, cf.lease)
		if cf.lease == 0 {
			dur = w.uniform(300e6, 900e6)
		}
	}
	if w.stopping {
		dur = min(dur, 5e6)
	}
	work := func() { w.instAt(w.now+dur, c.in, func() { c.endWork(g) }) }
	if cf.resource {
		c.resRead(g, work)
	} else {
		work()
	}
	if cf.extendEvery > 0 && cf.lease > 0 {
		w.instAt(w.now+cf.extendEvery, c.in, func() { c.extendTick(g) })
	}
	if cf.reentrantP > 0 && w.chance(cf.reentrantP) {
		w.instAt(w.now+dur/2, c.in, func() {
			if g == c.holdGen && c.holding && c.op == nil && !c.wantRelease {
				c.startAcquire(c.holdKey, true)
			}
		})
	}
}

func (c *client) checkValidity(g int) {
	if g != c.holdGen || !c.holding {
		return
	}
	if c.w.now < c.validUntil {
		c.w.instAt(c.validUntil, c.in, func() { c.checkValidity(g) })
		return
	}
	c.loseLease()
}

// loseLease: the client library says the lease is gone (MODEL §5 lost).
func (c *client) loseLease() {
	if !c.holding {
		return
	}
	key := c.holdKey
	idx := c.emit(&Event{Type: "ok", F: "lost", Key: key})
	if c.recording() {
		c.w.cr.losts = append(c.w.cr.losts, &lostRec{client: c.name, inst: c.in.n, key: key, idx: idx})
		if c.hold != nil {
			c.hold.endIdx, c.hold.endKind = idx, "lost"
		}
	}
	c.dropHold()
	if c.op != nil {
		c.lostPending = true
		return
	}
	c.afterLost(key)
}

func (c *client) afterLost(key string) {
	c.lostPending = false
	if c.w.chance(c.cfg().cleanupAfterLostP) {
		c.plainRelease(key)
		return
	}
	c.think()
}

// onServiceLost: the service says the lease on key is gone.
func (c *client) onServiceLost(key string, grant int64) {
	if c.holding && c.holdKey == key {
		c.loseLease()
		return
	}
	if c.lastGrant[key] == grant {
		// It arrives after the client let the key go: still a lost
		// notification (counted), ending no hold.
		idx := c.emit(&Event{Type: "ok", F: "lost", Key: key})
		if c.recording() {
			c.w.cr.losts = append(c.w.cr.losts, &lostRec{client: c.name, inst: c.in.n, key: key, idx: idx})
		}
	}
}

func (c *client) holdContinue() {
	if !c.holding {
		if c.lostPending {
			c.afterLost(c.holdKey)
		}
		return
	}
	g := c.holdGen
	if c.wantRelease {
		c.release(g)
	}
}

func (c *client) endWork(g int) {
	if g != c.holdGen || !c.holding {
		return
	}
	if c.cfg().resource && c.readOK {
		c.resWrite(g, func() { c.release(g) })
		return
	}
	c.release(g)
}

// --- the protected resource ----------------------------------------------
