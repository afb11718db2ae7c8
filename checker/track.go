package checker

import (
	"fmt"
	"strings"

	"github.com/lockbench/lockbench/history"
)

// This file follows MODEL §3–§5: clients and their operations, instances
// and their states, and holds — what each client believes. Mutual
// exclusion (§6), linearizability (§8) and availability (§11) all read the
// holds made here, so they agree by construction on when a hold begins and
// ends.

// endReason is why a hold ended (MODEL §5).
type endReason uint8

const (
	inForce endReason = iota
	byRelease
	byLost
	byDeath
	byEnd
)

// hold is one client's believed hold of one key (MODEL §5).
type hold struct {
	cl      *client
	key     string
	begin   int64 // the acquire's ok
	acqCall int64 // the acquire's invoke
	token   uint64
	kl      *keyLive // its key
	end     int64
	reason  endReason
	// release is the outcome of the release that ended it ("" while it
	// is in flight or when it ended otherwise).
	release history.Type
	// lost: a lost notification for the key came between the grant and
	// the completion of the release (MODEL §8: R is then the grant).
	lost bool
	// death is the instant its instance died while it held (-1: did not).
	death int64
	// resolved: its end is known, and the release that ended it (if any)
	// completed: nothing more can change what it tells.
	resolved bool
	// segFrom is when its current live stretch began (-1: its client is
	// not live); segs its closed live stretches since the first heal:
	// service, if it turns out good (MODEL §11).
	segFrom int64
	segs    []iv
	// lin is its key's linearizability window while it is in it.
	lin *linWindow
	// gone is, for a lease nothing renews unseen, the latest instant the
	// lease may run out in an allowed world with the ok renewals placed
	// (MODEL §6): each as late as the grant lets it; never: no lease to
	// infer from. pool are the invokes, in order, of its extensions of
	// unknown outcome not yet placed: each may land later, one lease
	// more (latestExpiry). taken is the first instant the service said
	// it had taken the grant back: another client's grant, a refused
	// extension, an accepted wrong-token release. The earlier of the
	// latest expiry and taken begins its zombie time.
	gone, taken int64
	pool        []int64
}

// good reports whether the hold ended by a release that returned ok.
func (h *hold) good() bool { return h.reason == byRelease && h.release == history.OK }

// revokeFrom is R (MODEL §8): the earliest instant from which the service
// may take the grant back without a release.
func (h *hold) revokeFrom() int64 {
	switch {
	case h.lost:
		return h.begin
	case h.death >= 0:
		return h.death
	}
	return never
}

const never = int64(1<<63 - 1)

// instance is a worker instance "i<N>" (MODEL §4).
type instance struct {
	name    string
	dead    bool
	deathT  int64
	killed  bool // dead by a kill fault
	paused  int  // pause faults in force on it
	clients []*client
	// unknown are acquires of its clients with an unknown outcome whose
	// possible grant dies with it (MODEL §8: R is the death).
	unknown []*hold
}

func (in *instance) live() bool { return !in.dead && in.paused == 0 }

// op is a lock operation in flight (MODEL §3).
type op struct {
	f    string
	key  string
	call int64
	// from is when its latency counts from: its invoke, or when an
	// open-loop attempt was due (MODEL §15).
	from int64
	// h is, for a release or an extension, the hold it acts on (nil if
	// the client held none); for an acquire, nil until it completes.
	h   *hold
	lin *linOp
	kl  *keyLive // its key's state
	// late: a release or extension invoked after its grant was certainly
	// gone (MODEL §6).
	late bool
}

// client is one client "i<N>c<M>" (MODEL §3).
type client struct {
	proc  string
	inst  *instance
	busy  bool // a lock operation is in flight: cur
	cur   op
	store string  // key of the store operation in flight ("": none)
	holds holdSet // holds in force
	// waits is the key the client waits for (nil: none; MODEL §11);
	// askFrom since when it asks for it while live (-1: not live); away
	// the keys it left unserved for another (MODEL §11: demand if it comes
	// back).
	waits   *keyLive
	askFrom int64
	away    []*away
	// last is the key it used last: most events name it again.
	last *keyLive
	// releasing are holds whose release is in flight.
	releasing holdSet
	id        int // porcupine client id
}

func (c *client) live() bool { return c.inst.live() }

// parseProc splits "i2c0" into its instance's process name "i2" and
// true; a bare "i2" gives "i2" and false. history.ParseProc reads it.
func parseProc(proc string) (inst string, isClient bool, ok bool) {
	p, err := history.ParseProc(proc)
	switch {
	case err != nil:
		return "", false, false
	case !p.IsClient():
		return proc, false, true
	}
	// The instance's name is the client's up to its "c" (no allocation:
	// the checker reads one per event).
	return proc[:strings.IndexByte(proc, 'c')], true, true
}

// instanceOf maps a fault target "instance-2" to the instance's process
// name "i2". history.ParseInstance reads it.
func instanceOf(target string) (string, bool) {
	n, err := history.ParseInstance(target)
	if err != nil {
		return "", false
	}
	return history.InstanceProc(n).String(), true
}

func (c *Case) instance(name string) *instance {
	in := c.insts[name]
	if in == nil {
		in = &instance{name: name, deathT: -1}
		c.insts[name] = in
	}
	return in
}

func (c *Case) client(proc string) *client {
	cl := c.clients[proc]
	if cl == nil {
		inst, _, _ := parseProc(proc)
		cl = &client{proc: proc, inst: c.instance(inst), id: len(c.clients), askFrom: -1}
		cl.inst.clients = append(cl.inst.clients, cl)
		c.clients[proc] = cl
		c.clientList = append(c.clientList, cl)
	}
	return cl
}

// malformed records that the history breaks its own rules (MODEL §3).
func (c *Case) malformed(format string, args ...any) {
	if len(c.malformedMsgs) < MaxExamples {
		c.malformedMsgs = append(c.malformedMsgs, fmt.Sprintf(format, args...))
	}
	c.malformedN++
}

func isLockOp(f string) bool {
	switch f {
	case history.OpAcquire, history.OpRelease, history.OpExtend, history.OpForeignRelease:
		return true
	}
	return false
}

// deadProc reports whether proc (a client or an instance) belongs to a
// dead instance. It allocates only the first time it sees a name.
func (c *Case) deadProc(proc string) bool {
	if cl := c.clients[proc]; cl != nil {
		return cl.inst.dead
	}
	if in := c.insts[proc]; in != nil {
		return in.dead
	}
	inst, _, _ := parseProc(proc)
	in := c.insts[inst]
	return in != nil && in.dead
}

// operation handles an invoke, ok, fail or info event of a client.
func (c *Case) operation(cl *client, e *history.Event) {
	if e.F == history.OpDropped {
		c.fig.dropped++ // an instance's notification: load not delivered
		c.fig.offer++
		return
	}
	if cl == nil {
		if _, isClient, ok := parseProc(e.Proc); !ok || !isClient {
			c.malformed("%s %s by %q, which is not a client", e.Type, e.F, e.Proc)
			return
		}
		cl = c.client(e.Proc)
	}
	switch {
	case e.F == history.OpLost:
		if e.Type != history.OK {
			c.malformed("%s lost of %s: a lost notification is an ok event", e.Type, e.Proc)
			return
		}
		c.res.LeasesLost++
		c.lostNote(cl, e.Key, e.T)
	case e.F == history.OpResource:
		if e.Type == history.Info {
			c.harness.resourceError(e.T)
		}
	case e.F == history.OpStore:
		c.storeOp(cl, e)
	case isLockOp(e.F):
		if e.Type == history.Invoke {
			c.invoke(cl, e)
		} else {
			c.complete(cl, e)
		}
	}
}

func (c *Case) storeOp(cl *client, e *history.Event) {
	if e.Type == history.Invoke {
		if cl.store != "" {
			c.malformed("%s invoked a store operation while another was in flight", cl.proc)
		}
		cl.store = e.Key
		return
	}
	if cl.store == "" {
		c.malformed("%s: %s store with no store operation in flight", cl.proc, e.Type)
	}
	cl.store = ""
}

func (c *Case) invoke(cl *client, e *history.Event) {
	if cl.busy {
		c.malformed("%s invoked %s of %s while its %s of %s was in flight", cl.proc, e.F, e.Key, cl.cur.f, cl.cur.key)
		return
	}
	cl.cur = op{f: e.F, key: e.Key, call: e.T, from: e.T, kl: c.keyOf(cl, e.Key)}
	cl.busy = true
	o := &cl.cur
	switch e.F {
	case history.OpAcquire:
		if e.Intended > 0 {
			o.from = e.Intended
			c.fig.offer++
		}
		c.waitFor(cl, e.Key, e.T)
	case history.OpRelease:
		if h := cl.holds.get(e.Key); h != nil {
			o.h = h
			c.lateInvoke(o, h, e.T)
			cl.releasing.put(h)
			c.fig.hol.add(e.T - h.begin)
			others := h.kl.waiters
			if cl.waits == h.kl && cl.live() {
				others-- // the releaser itself waits (a refused re-entrant acquire): not another
			}
			if kl := h.kl; !c.stopped && kl.handFrom < 0 && others > 0 {
				kl.handFrom, kl.handBy = e.T, cl // MODEL §15: a hand-off begins
			}
			c.endHold(h, byRelease, e.T)
		}
	case history.OpExtend:
		o.h = cl.holds.get(e.Key)
		c.lateInvoke(o, o.h, e.T)
	}
	c.lin.invoke(cl, o)
}

func (c *Case) complete(cl *client, e *history.Event) {
	o := &cl.cur
	if !cl.busy || o.f != e.F || o.key != e.Key {
		what := "no operation in flight"
		if cl.busy {
			what = fmt.Sprintf("its %s of %s in flight", o.f, o.key)
		}
		c.malformed("%s: %s %s of %s with %s", cl.proc, e.Type, e.F, e.Key, what)
		return
	}
	cl.busy = false
	switch e.F {
	case history.OpAcquire:
		switch e.Type {
		case history.OK:
			c.res.AcquiresOK++
			c.acquired(cl, o, e)
		case history.Fail:
			c.res.AcquiresFailed++
			c.fig.completed(e.Type, e.T-o.from)
		case history.Info:
			c.res.AcquiresUnknown++
			c.fig.completed(e.Type, e.T-o.from)
			c.unknownAcquire(cl, o)
		case history.Unsent:
			c.res.AcquiresUnsent++ // MODEL §3: surely no grant, and no word of the service
			c.fig.completed(e.Type, e.T-o.from)
		}
	case history.OpRelease:
		switch e.Type {
		case history.Fail:
			c.res.ReleasesNotHeld++
		case history.OK:
			c.fig.releases++
		}
		c.lateDone(o, e.Type)
		if h := cl.releasing.get(e.Key); h != nil && h == o.h {
			cl.releasing.del(h)
			h.release = e.Type
			c.resolve(h)
		}
	case history.OpForeignRelease:
		if e.Type == history.OK {
			c.res.WrongTokenReleases++
			// MODEL §6: the service removed the lock; whoever held the key
			// holds it no more.
			for _, h := range c.keyOf(cl, e.Key).holds {
				h.taken = min(h.taken, e.T)
			}
		}
	case history.OpExtend:
		// MODEL §6: an extension counts whenever its answer comes, in the
		// hold or after a lost signal ended it (resolve waited for it).
		h := o.h
		c.lateDone(o, e.Type)
		switch {
		case h == nil:
		case e.Type == history.OK:
			c.renewed(h, o.call, e.T)
		case e.Type == history.Fail:
			h.taken = min(h.taken, e.T) // the service said it no longer held it
		case e.Type == history.Info:
			c.unknownExtend(h, o)
		}
		c.fig.extended(e.Type)
		c.lin.complete(cl, o, e)
		if h != nil && h.reason != inForce && h.reason != byRelease {
			c.resolve(h)
		}
		return
	}
	c.lin.complete(cl, o, e)
}

// acquired begins a hold, or continues the one in force (MODEL §5).
func (c *Case) acquired(cl *client, o *op, e *history.Event) {
	c.stopWaiting(cl, e.T, false)
	kl := c.keyOf(cl, e.Key)
	if e.Token > 0 { // MODEL §7
		if e.Token <= kl.maxToken {
			c.res.TokenRegressions++
		} else {
			kl.maxToken = e.Token
		}
	}
	c.fig.completed(history.OK, e.T-o.from)
	if kl.handFrom >= 0 && cl.live() {
		// MODEL §15: the hand-off ends, handed over to another client (a
		// sample) or taken straight back by the releaser (a barge: no
		// sample, or it would time the releaser's next hold)
		if kl.handBy == cl {
			c.fig.barges++
		} else {
			c.fig.hand.add(e.T - kl.handFrom)
		}
		kl.handFrom, kl.handBy = -1, nil
	}
	c.live.acquired(cl, e.Key, e.T)
	if len(c.awaitGrant) > 0 && cl.live() {
		// An ok dated before the fault-start it follows (a record out of
		// order, §2) is not the next grant: a duration is never negative.
		n := 0
		for _, f := range c.awaitGrant {
			if e.T >= f.start {
				f.nextGrant = e.T
				continue
			}
			c.awaitGrant[n] = f
			n++
		}
		c.awaitGrant = c.awaitGrant[:n]
	}
	if h := cl.holds.get(e.Key); h != nil {
		c.res.DuplicateGrants++
		h.token = e.Token
		c.renewed(h, o.call, e.T) // the service granted it anew: as an extension (MODEL §6)
		o.h = h
		// MODEL §6 rule 1: a grant of the key to this client, re-entrant
		// or not, takes it from every other client holding it.
		for _, other := range kl.holds {
			if other.cl != cl {
				other.taken = min(other.taken, e.T)
			}
		}
		return
	}
	h := c.newHold()
	*h = hold{cl: cl, key: e.Key, kl: kl, begin: e.T, acqCall: o.call, token: e.Token, end: -1, death: -1, gone: c.sureExpiry(e.T), taken: never, segFrom: -1}
	o.h = h
	if !c.meta.Lockless {
		c.mutex.begin(c, h)
	}
	cl.holds.put(h)
	c.live.holdBegin(h)
}

// unknownAcquire records an acquire whose outcome is unknown: no hold, but
// the service may have granted it (MODEL §5, §8).
func (c *Case) unknownAcquire(cl *client, o *op) {
	h := &hold{cl: cl, key: o.key, acqCall: o.call, begin: never, end: -1, death: -1, resolved: true}
	o.h = h
	cl.inst.unknown = append(cl.inst.unknown, h)
}

// endHold ends h at t for reason (MODEL §5).
func (c *Case) endHold(h *hold, reason endReason, t int64) {
	if h.reason != inForce {
		return
	}
	h.reason, h.end = reason, t
	h.cl.holds.del(h)
	c.live.holdEnd(h, t)
	if !c.meta.Lockless {
		c.mutex.end(c, h, t, reason)
	}
	if reason != byRelease && !c.extending(h) {
		c.resolve(h)
	}
}

// extending reports whether h's client has an extension of h in flight:
// its answer, which may come after the hold ended, still tells when the
// service may have held the grant (MODEL §6), so h is resolved then.
func (c *Case) extending(h *hold) bool {
	return h.cl.busy && h.cl.cur.f == history.OpExtend && h.cl.cur.h == h
}

// resolve marks h as fully known and lets availability and
// linearizability use it.
func (c *Case) resolve(h *hold) {
	if h.resolved {
		return
	}
	h.resolved = true
	if !c.meta.Lockless {
		c.mutex.zombie(h, c.latestExpiry(h))
	}
	c.live.resolved(h)
	c.lin.resolved(h)
	if c.clients[h.cl.proc].cur.h == h {
		h.cl.cur.h = nil
	}
	c.recycle(h)
}

// lostNote handles a lost notification for key (MODEL §5, §8).
func (c *Case) lostNote(cl *client, key string, t int64) {
	if h := cl.releasing.get(key); h != nil {
		h.lost = true // before the release completed: R is the grant
	}
	if h := cl.holds.get(key); h != nil {
		h.lost = true
		c.endHold(h, byLost, t)
	}
}

// waitFor makes cl wait for key from t (MODEL §11).
func (c *Case) waitFor(cl *client, key string, t int64) {
	if cl.waits != nil && cl.waits.name == key {
		return
	}
	c.stopWaiting(cl, t, true)
	kl := c.keyOf(cl, key)
	cl.waits = kl
	c.live.waitBegin(cl, kl, t)
}

// stopWaiting ends cl's wait at t; moved: for another key, without
// getting this one.
func (c *Case) stopWaiting(cl *client, t int64, moved bool) {
	if cl.waits == nil {
		return
	}
	c.live.waitEnd(cl, cl.waits, t, moved)
	cl.waits = nil
}

// newHold returns a hold from the free list, or a new one.
func (c *Case) newHold() *hold {
	if n := len(c.freeHolds); n > 0 {
		h := c.freeHolds[n-1]
		c.freeHolds = c.freeHolds[:n-1]
		return h
	}
	return &hold{}
}

// recycle returns a resolved hold nothing refers to any more to the free
// list, so that steady-state checking allocates nothing per acquisition.
// With linearizability on, a window keeps its holds until it is checked.
func (c *Case) recycle(h *hold) {
	if c.lin.on || len(h.segs) > 0 || h.begin == never {
		return
	}
	*h = hold{}
	c.freeHolds = append(c.freeHolds, h)
}

// holdSet is a client's few holds: a slice, searched by key, cheaper than
// a map for the one or two keys a client holds at a time.
type holdSet []*hold
