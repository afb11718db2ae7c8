package sim

import "fmt"

// This file holds a simulated client's operations after its acquire: the
// release, extension and wrong-token release, and its requests to the
// protected resource.

func (c *client) release(g int) {
	w := c.w
	if g != c.holdGen || !c.holding {
		return
	}
	if c.op != nil {
		c.wantRelease = true
		return
	}
	c.wantRelease = false
	key := c.holdKey
	if !c.wrongDone && c.cfg().wrongTokenP > 0 && w.chance(c.cfg().wrongTokenP) {
		c.wrongDone = true
		op := c.invoke("release-wrong-token", key)
		c.op = op
		c.simpleOp(op, func(r string) string {
			if r == "released" {
				return "ok"
			}
			return "fail"
		}, "lock is held with another token", func() {
			if c.holding {
				c.release(c.holdGen)
			} else if c.lostPending {
				c.afterLost(key)
			}
		})
		return
	}
	c.plainRelease(key)
}

// plainRelease invokes a release of key (ending the hold, if any) and
// thinks after it.
func (c *client) plainRelease(key string) {
	op := c.invoke("release", key)
	c.op = op
	c.simpleOp(op, func(r string) string {
		if r == "released" {
			return "ok"
		}
		return "fail"
	}, "lock is no longer held by this client", c.think)
}

// simpleOp sends one request for op (release, extend, wrong-token
// release), with the op timeout, and completes it.
func (c *client) simpleOp(op *opRec, outcome func(string) string, failErr string, then func()) {
	w := c.w
	srv := w.serverOf(op.key)
	c.tgen++
	g := c.tgen
	done := false
	if c.notSent(srv) {
		w.instAt(w.now+w.uniform(20e3, 500e3), c.in, func() {
			if c.op != op || g != c.tgen {
				return
			}
			c.op = nil
			c.complete(op, "unsent", 0, errNotSent)
			c.afterSimple(op, "unsent", then)
		})
		return
	}
	w.request(c.in, srv, func() {
		var r string
		switch op.kind {
		case "release":
			r = w.svc.release(c, op)
		case "extend":
			r = w.svc.extend(c, op)
		default:
			r = w.svc.wrongRelease(c, op)
		}
		w.reply(c.in, srv, 0, func() {
			if done || c.op != op || g != c.tgen {
				return
			}
			done = true
			c.op = nil
			o := outcome(r)
			e := ""
			if o == "fail" {
				e = failErr
			}
			c.complete(op, o, 0, e)
			c.afterSimple(op, o, then)
		})
	})
	w.instAt(w.now+c.cfg().opTimeout, c.in, func() {
		if done || c.op != op || g != c.tgen {
			return
		}
		done = true
		c.op = nil
		c.complete(op, "info", 0, "context deadline exceeded")
		c.afterSimple(op, "info", then)
	})
}

func (c *client) afterSimple(op *opRec, outcome string, then func()) {
	if op.kind == "extend" {
		if outcome == "ok" && c.holding {
			c.validUntil = c.w.run.Events[op.invIdx].T + c.cfg().lease - c.cfg().validityMargin
		}
		if outcome == "fail" && c.holding && !c.cfg().keepAfterRefusedExtend {
			c.loseLease()
			return
		}
	}
	then()
}

func (c *client) extendTick(g int) {
	w := c.w
	if g != c.holdGen || !c.holding || c.wantRelease {
		return
	}
	if c.op != nil {
		w.instAt(w.now+c.cfg().extendEvery/4, c.in, func() { c.extendTick(g) })
		return
	}
	op := c.invoke("extend", c.holdKey)
	c.op = op
	c.simpleOp(op, func(r string) string {
		if r == "extended" {
			return "ok"
		}
		return "fail"
	}, "lock is not held", func() {
		if !c.holding {
			if c.lostPending {
				c.afterLost(op.key)
			}
			return
		}
		if c.wantRelease {
			c.release(c.holdGen)
			return
		}
		w.instAt(w.now+c.cfg().extendEvery, c.in, func() { c.extendTick(g) })
	})
}

func (c *client) resRequest(write bool, g int, cont func()) {
	w := c.w
	c.rgen++
	rg := c.rgen
	done := false
	sent := w.now
	token := c.token
	reg := w.res[c.holdKey]
	extra := int64(0)
	if w.slowResource {
		w.slowResource = false
		extra = c.cfg().opTimeout + w.uniform(50e6, 300e6)
	}
	w.requestX(c.in, "resource", extra, func() {
		// the resource serves a request that reached it whatever became
		// of its sender: a dead holder's late write lands, and its mark
		// counts (MODEL §3, §9)
		late := w.now > sent+c.cfg().opTimeout
		reg.serve(c, write, token, late)
		w.reply(c.in, "resource", 0, func() {
			if done || rg != c.rgen {
				return
			}
			done = true
			if !write {
				c.readOK = true
			}
			cont()
		})
	})
	w.instAt(w.now+c.cfg().opTimeout, c.in, func() {
		if done || rg != c.rgen {
			return
		}
		done = true
		if !write {
			c.readOK = false
		}
		c.resourceFailed(fmt.Sprintf("resource %s: i/o timeout", map[bool]string{true: "write", false: "read"}[write]))
		cont()
	})
}

func (c *client) resRead(g int, cont func()) { c.resRequest(false, g, cont) }

func (c *client) resWrite(g int, cont func()) { c.resRequest(true, g, cont) }

// resourceFailed records a failed request to the protected resource.
func (c *client) resourceFailed(err string) {
	if !c.recording() {
		return
	}
	idx := c.emit(&Event{Type: "info", F: "resource", Key: c.holdKey, Err: err})
	c.w.cr.resFail = append(c.w.cr.resFail, ievent{idx, c.in.n, c.holdKey})
}
