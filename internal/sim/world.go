package sim

import (
	"container/heap"
	"fmt"
	"math"
	"math/rand/v2"
)

const never = math.MaxInt64

// action is one scheduled step of the simulation.
type action struct {
	at  int64
	seq uint64
	fn  func()
}

type aheap []*action

func (h aheap) Len() int { return len(h) }
func (h aheap) Less(i, j int) bool {
	if h[i].at != h[j].at {
		return h[i].at < h[j].at
	}
	return h[i].seq < h[j].seq
}
func (h aheap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *aheap) Push(x any)   { *h = append(*h, x.(*action)) }
func (h *aheap) Pop() any {
	old := *h
	a := old[len(old)-1]
	*h = old[:len(old)-1]
	return a
}

// world simulates one case: a discrete-event simulation in ns.
type world struct {
	rng     *rand.Rand
	now     int64
	seq     uint64
	pq      aheap
	run     *Run
	cr      *caseRec
	cfg     *caseConfig
	t0      int64
	insts   []*instance
	clients []*client
	servers []*server
	svc     *service
	res     map[string]*register // the protected resource, one register per key
	links   []*linkFault
	faults  []*faultRun

	stopping     bool
	endDone      bool
	pendingLate  int // late faults still to write a mark: the case ends after them
	dupStartDone bool
	stopIdx      int
	backdateNext bool // the next client event is dated a little too early
	slowResource bool // the next resource request arrives after its deadline
	// extraWaits: waits of clients the simulation does not run (an
	// instance beyond the lanes), ended at the stop
	extraWaits []*waitRec
}

// at schedules fn at t: with a tick, at the first grid point at or after
// t (a timer never fires early).
func (w *world) at(t int64, fn func()) {
	if tk := w.cfg.tick; tk > 0 {
		t = (t + tk - 1) / tk * tk
	}
	w.push(t, fn)
}

// msgAt schedules a message's arrival at t: with a tick, at the nearest
// grid point (a latency under half a tick arrives at once: the same
// timestamp as its sending).
func (w *world) msgAt(t int64, fn func()) {
	if tk := w.cfg.tick; tk > 0 {
		t = (t + tk/2) / tk * tk
		if t < w.now {
			t = (w.now + tk - 1) / tk * tk
		}
	}
	w.push(t, fn)
}

// atExact schedules a coordinator's action (fault marks, the stop, a
// crash) at t, off the grid: no client event shares its timestamp.
func (w *world) atExact(t int64, fn func()) { w.push(w.offGrid(t), fn) }

func (w *world) offGrid(t int64) int64 {
	if tk := w.cfg.tick; tk > 0 && t%tk == 0 {
		t++
	}
	return t
}

func (w *world) push(t int64, fn func()) {
	if t < w.now {
		t = w.now
	}
	w.seq++
	heap.Push(&w.pq, &action{at: t, seq: w.seq, fn: fn})
}

func (w *world) loop() {
	for len(w.pq) > 0 && !w.endDone {
		a := heap.Pop(&w.pq).(*action)
		w.now = a.at
		a.fn()
	}
}

// emit records an event at the current time: times are strictly increasing
// in file order (a tie is moved on by a nanosecond), so that every
// instant of the history is one event, unless the case has a tick: then
// events share timestamps.
func (w *world) emit(e *Event) int {
	t := w.now
	if w.cfg.tick > 0 && t >= w.run.lastT {
		// equal times allowed
	} else if t <= w.run.lastT {
		t = w.run.lastT + 1
	}
	if w.backdateNext && e.Proc != "" && e.Type != "mark" && w.run.lastT-w.t0 > 2000 {
		// out of order: dated before the event before it (MODEL §2)
		w.backdateNext = false
		e.T = w.run.lastT - w.uniform(1, 1000)
		w.run.Events = append(w.run.Events, e)
		idx := len(w.run.Events) - 1
		w.cr.backdated = append(w.cr.backdated, idx)
		w.cr.backdatedOp = true
		return idx
	}
	e.T = t
	w.run.lastT = t
	w.run.Events = append(w.run.Events, e)
	return len(w.run.Events) - 1
}

func (w *world) uniform(lo, hi int64) int64 {
	if hi <= lo {
		return lo
	}
	return lo + w.rng.Int64N(hi-lo+1)
}

func (w *world) chance(p float64) bool { return w.rng.Float64() < p }

// --- instances ---------------------------------------------------------

type instance struct {
	w        *world
	n        int
	clients  []*client
	paused   int // pauses in force with an effect
	hung     bool
	dying    bool // killed: records what it still does (posthumous)
	dead     bool // records nothing any more
	deferred []func()
	rec      *instRec
}

func (in *instance) name() string { return fmt.Sprintf("i%d", in.n) }

// run runs a step of one of the instance's clients, unless the instance is
// dead (dropped) or paused (deferred to its resumption).
func (in *instance) run(fn func()) {
	switch {
	case in.dead:
	case in.paused > 0 || in.hung:
		in.deferred = append(in.deferred, fn)
	default:
		fn()
	}
}

func (w *world) instAt(t int64, in *instance, fn func()) {
	w.at(t, func() { in.run(fn) })
}

func (in *instance) resume() {
	in.paused--
	if in.paused > 0 || in.hung {
		return
	}
	d := in.deferred
	in.deferred = nil
	for _, fn := range d {
		fn := fn
		in.w.at(in.w.now, func() { in.run(fn) })
	}
}

// alive: the instance can still act (live or paused, not killed).
func (in *instance) alive() bool { return !in.dead && !in.dying }

// die ends the instance's clients' holds and waits at event idx (MODEL §4:
// dead from its kill's fault-start or its crash mark).
func (in *instance) die(idx int, kind string, dying int64) {
	if in.rec.deathIdx >= 0 {
		return
	}
	in.rec.deathIdx = idx
	in.rec.deathKind = kind
	for _, c := range in.clients {
		c.endAll(idx, "death")
	}
	in.dying = true
	if in.w.svc.freeOnDeath {
		d := dying + in.w.uniform(500e3, 10e6)
		in.w.at(in.w.now+d, func() { in.w.svc.freeInstance(in.n) })
	}
}

// --- servers and links -------------------------------------------------

type server struct {
	name   string
	down   int
	paused int
	queue  []func()
}

func (w *world) server(name string) *server {
	for _, s := range w.servers {
		if s.name == name {
			return s
		}
	}
	s := &server{name: name}
	w.servers = append(w.servers, s)
	return s
}

func (s *server) receive(w *world, fn func()) {
	switch {
	case s.down > 0:
	case s.paused > 0:
		s.queue = append(s.queue, fn)
	default:
		fn()
	}
}

func (s *server) resume(w *world) {
	s.paused--
	if s.paused > 0 {
		return
	}
	q := s.queue
	s.queue = nil
	for _, fn := range q {
		fn := fn
		w.msgAt(w.now, func() { s.receive(w, fn) })
	}
}

// linkFault is one target of a link fault: the link from instance inst (0:
// every instance) to server srv.
type linkFault struct {
	fr        *faultRun
	srv       string
	inst      int
	partition bool
	add       int64
	inForce   bool // between its fault-start and fault-end
	effective bool // its effect applies
	traffic   int  // messages that tried to cross it while in force
}

func (w *world) latency() int64 { return w.uniform(150e3, 1500e3) }

// cross works out what the link from in to srv does to one message:
// dropped, or delayed by d.
func (w *world) cross(in *instance, srv string) (drop bool, d int64) {
	d = w.latency()
	for _, lf := range w.links {
		if lf.srv != srv || (lf.inst != 0 && lf.inst != in.n) {
			continue
		}
		if lf.inForce {
			lf.traffic++
		}
		if !lf.effective {
			continue
		}
		if lf.partition {
			drop = true
		}
		d += lf.add
	}
	return drop, d
}

// refusedDial: a partition of the link from in to srv refuses the dial
// (refuseDials): the request is never sent, and the client knows it at
// once. A refused dial is traffic the fault stopped (MODEL §10).
func (w *world) refusedDial(in *instance, srv string) bool {
	if !w.cfg.refuseDials {
		return false
	}
	refused := false
	for _, lf := range w.links {
		if lf.srv != srv || (lf.inst != 0 && lf.inst != in.n) || !lf.partition {
			continue
		}
		if lf.inForce {
			lf.traffic++
		}
		refused = refused || lf.effective
	}
	return refused
}

// request sends fn to server srv from instance in.
func (w *world) request(in *instance, srv string, fn func()) { w.requestX(in, srv, 0, fn) }

func (w *world) requestX(in *instance, srv string, extra int64, fn func()) {
	if in.dead {
		return
	}
	drop, d := w.cross(in, srv)
	if drop {
		return
	}
	s := w.server(srv)
	w.msgAt(w.now+d+extra, func() { s.receive(w, fn) })
}

// reply sends fn back from server srv to a client of instance in.
func (w *world) reply(in *instance, srv string, extra int64, fn func()) {
	drop, d := w.cross(in, srv)
	if drop {
		return
	}
	w.msgAt(w.now+d+extra, func() { in.run(fn) })
}

func (w *world) clientByName(name string) *client {
	for _, c := range w.clients {
		if c.name == name {
			return c
		}
	}
	return nil
}

func (w *world) serverOf(key string) string {
	var k int
	fmt.Sscanf(key, "k%d", &k)
	if w.cfg.lanes > 0 {
		k %= w.cfg.keys // every lane's keys live on the servers alike
	}
	return fmt.Sprintf("srv-%d", k%w.cfg.servers+1)
}
