package checker

import "github.com/lockbench/lockbench/history"

// This file is an instance's life as the record tells it (MODEL §4): its
// death ends its holds and makes what it had in flight unknown; a pause
// makes its clients neither hold nor wait for the liveness rules.

// die makes an instance dead at t (MODEL §4): its holds end, its
// operations in flight become unknown.
func (c *Case) die(in *instance, t int64, killed bool) {
	if in.dead {
		return
	}
	if in.live() { // a paused instance's holds and waits no longer count already
		c.live.instanceDown(in, t)
	}
	in.dead, in.deathT, in.killed = true, t, killed
	for _, cl := range in.clients {
		c.abandon(cl)
		if cl.store != "" {
			c.store.unknownWrite(cl.store) // in flight: it may have committed
			cl.store = ""
		}
		c.store.dropClient(cl.proc)
		for _, h := range cl.holds.all() {
			h.death = t
			c.endHold(h, byDeath, t)
		}
		c.live.clientGone(cl, t)
		cl.waits = nil
	}
	for _, h := range in.unknown {
		if h.death < 0 {
			h.death = t
		}
	}
}

// pause and resume an instance (MODEL §4).
func (c *Case) pause(in *instance, t int64) {
	if in.live() {
		c.live.instanceDown(in, t)
	}
	in.paused++
}

func (c *Case) resume(in *instance, t int64) {
	if in.paused == 0 {
		return
	}
	in.paused--
	if in.live() {
		c.live.instanceUp(in, t)
	}
}

// finish ends what is still open when the case ends (MODEL §3, §5).
func (c *Case) finish(t int64) {
	for _, cl := range c.clientList {
		c.abandon(cl)
		for _, h := range cl.holds.all() {
			c.endHold(h, byEnd, t)
		}
		for _, h := range cl.releasing.all() {
			cl.releasing.del(h)
			c.resolve(h)
		}
	}
}

// abandon makes cl's lock operation in flight an unknown outcome (MODEL §3).
func (c *Case) abandon(cl *client) {
	if !cl.busy {
		return
	}
	o := &cl.cur
	cl.busy = false
	if h := o.h; o.f == history.OpExtend && h != nil {
		c.unknownExtend(h, o)
		if h.reason != inForce && h.reason != byRelease {
			c.resolve(h) // it waited for this extension's answer
		}
	}
	if o.f == history.OpAcquire {
		c.res.AcquiresUnknown++
		c.fig.abandoned()
		c.unknownAcquire(cl, o)
	}
	if h := cl.releasing.get(o.key); h != nil && o.f == history.OpRelease {
		cl.releasing.del(h)
		h.release = history.Info
		c.resolve(h)
	}
	c.lin.unknown(cl, o)
}
