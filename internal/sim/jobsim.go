package sim

import (
	"container/heap"
	"fmt"
	"math/rand/v2"
	"slices"
)

// This file simulates runs of job workloads (checker/MODEL.md §20, §21):
// clients on instances take jobs through a model strategy, apply each
// job's effect to a model sink that records what it committed, under
// pauses and kills of instances (at drawn instants or at a drawn phase of
// a job), faults on servers and links, in cases of one trial or of trials
// side by side; the coordinator's reads of the sink become sink-effect
// marks. The simulator keeps its own ground truth (jobtruth.go works the
// figures out of it) and writes the history with its own encoder.

// JobsRun is one simulated run of job workloads.
type JobsRun struct {
	Seed  uint64
	cases []*jobCase
	lines []jline
}

// jline is one history line at its time; seq breaks ties in the order
// the events happened.
type jline struct {
	t, seq int64
	b      []byte
}

// jstrategy is a model strategy: what guards a job and its effect.
type jstrategy struct {
	name, variant, family string
	lock                  bool  // the job's lock around the attempt (lease leaseNs)
	fenced                bool  // the sink refuses an effect below the highest token applied for the job
	register              bool  // the attempt checks the job done before its effect
	keyed                 bool  // the sink refuses a second effect of a job (idempotency key)
	queue                 bool  // a job is taken by one attempt at a time
	visibility            int64 // queue: the job is handed out again after this long (0: once its attempt ends)
	leaseNs               int64
}

var jstrategies = []jstrategy{
	{name: "lock", variant: "lock", family: "lock", lock: true},
	{name: "lock", variant: "lock {fenced: true}", family: "lock", lock: true, fenced: true},
	{name: "lock", variant: "lock {register: true}", family: "lock", lock: true, register: true},
	{name: "idempotency-key", variant: "idempotency-key", family: "dedupe", keyed: true},
	{name: "check-then-insert", variant: "check-then-insert", family: "dedupe", register: true},
	{name: "skip-locked", variant: "skip-locked", family: "queue", queue: true},
	{name: "skip-locked-visibility", variant: "skip-locked-visibility", family: "queue", queue: true, visibility: 1},
	{name: "no-lock", variant: "no-lock", family: "none"},
}

// jfault is a scheduled fault of a job case.
type jfault struct {
	name, typ, target, class string
	lane                     int
	at, dur                  int64 // scheduled, from the case start
	phase                    string
	aimed                    bool // executor@phase
	// what happened
	started, missed bool
	inst            int    // the instance it acted on (0: none)
	resolved        string // its concrete target
	start, end      int64
	armed           bool // waiting for a client at its phase
	mark            bool // the harness marks it unobserved
	marked          bool
}

// jattempt is one attempt, as it really happened.
type jattempt struct {
	proc, job      string
	n              int64
	inst           int
	start, end     int64  // end -1: none recorded
	endType        string // ok, fail, info; "" none
	effInv, effEnd int64  // -1: none
	effType        string
	lostAt         int64 // a lost signal during the attempt (-1: none)
	token          uint64
	commit         *jcommit
	phase          string
}

// jcommit is an effect the sink committed.
type jcommit struct {
	a       *jattempt
	t       int64 // when it committed
	outcome string
	read    int64 // when the coordinator read it (-1: never)
	seq     int
}

// jtry is a client's first asking for a period (periodic workloads).
type jtry struct {
	proc, job  string
	start, end int64
	attempted  bool
}

// jinst is one instance.
type jinst struct {
	n          int
	lane       int
	dead       bool
	deathT     int64
	pausedTo   int64 // paused until (0: not)
	pausedFrom int64
}

// jclient is one client.
type jclient struct {
	proc  string
	inst  *jinst
	tried map[string]int64
	cur   *jattempt
	last  string // periodic: the period last tried
	stop  bool
}

// jobCase is one simulated case (a batch of lanes, or one trial).
type jobCase struct {
	name, row              string
	trial, trials, need    int
	lanes, laneInsts       int
	insts                  []*jinst
	clients                []*jclient
	st                     jstrategy
	count                  int   // jobs per lane
	every, grace, dur      int64 // ns
	effect, before, after  int64
	think                  int64
	periodic               bool
	faults                 []*jfault
	start, stop, end       int64
	expectDup, expectStale string // "true", "false", "any", ""
	expectLost             string
	attempts               []*jattempt
	commits                []*jcommit
	tries                  map[string]*jtry
	tryOrder               []*jtry
	sinkError, badLines    bool
	sinkCut                int64 // with a sink error: commits read after this are never read
	locks                  map[string]*jlock
	done                   map[string]bool  // recorded complete
	taken                  map[string]int64 // queue: taken until (0: free; -1: until its attempt ends)
	takenBy                map[string]*jattempt
	tokens                 map[string]uint64 // per job: the last token granted
	fenceHi                map[string]uint64 // the highest token the sink applied per job
	applied                map[string]int
	w                      *jworld
	events                 []jline
	seq                    int64
	rng                    *rand.Rand
}

// jlock is a job's lock at the model service.
type jlock struct {
	holder string
	expiry int64
}

// jworld orders the case's actions in time.
type jworld struct {
	q   jqueue
	now int64
	seq int64
}

type jaction struct {
	t, seq int64
	c      *jclient // nil: the coordinator's
	f      func()
}

type jqueue []*jaction

func (q jqueue) Len() int { return len(q) }
func (q jqueue) Less(i, j int) bool {
	return q[i].t < q[j].t || q[i].t == q[j].t && q[i].seq < q[j].seq
}
func (q jqueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *jqueue) Push(x any)   { *q = append(*q, x.(*jaction)) }
func (q *jqueue) Pop() any {
	old := *q
	x := old[len(old)-1]
	*q = old[:len(old)-1]
	return x
}

func (jc *jobCase) at(t int64, c *jclient, f func()) {
	jc.w.seq++
	heap.Push(&jc.w.q, &jaction{t: t, seq: jc.w.seq, c: c, f: f})
}

// emit writes a line at time t (now, for a client's own event).
func (jc *jobCase) emit(t int64, b []byte) {
	jc.seq++
	jc.events = append(jc.events, jline{t: t, seq: jc.seq, b: b})
}

// SimulateJobs builds the run of a seed: one to three job cases.
func SimulateJobs(seed uint64) *JobsRun {
	rng := rand.New(rand.NewPCG(seed, 0x10b5))
	r := &JobsRun{Seed: seed}
	t := int64(1e9) + rng.Int64N(1e6)
	n := 1 + rng.IntN(3)
	for i := 0; i < n; i++ {
		for _, jc := range r.plan(rng, i) {
			jc.simulate(t)
			r.cases = append(r.cases, jc)
			r.lines = append(r.lines, jc.events...)
			t = jc.end + 1e6 + rng.Int64N(20e6)
		}
	}
	return r
}

// plan draws one row: a case of one trial, trials one after another, or
// trials side by side.
func (r *JobsRun) plan(rng *rand.Rand, i int) []*jobCase {
	st := jstrategies[rng.IntN(len(jstrategies))]
	base := &jobCase{st: st, rng: rng}
	base.name = fmt.Sprintf("jobs%d-%s", i+1, st.name)
	base.row = base.name
	base.count = 4 + rng.IntN(14)
	base.every = int64(10+rng.IntN(30)) * 1e6
	base.grace = int64(100+rng.IntN(200)) * 1e6
	base.effect = int64(1+rng.IntN(8)) * 1e6
	base.before = int64(5+rng.IntN(30)) * 1e6
	base.after = int64(1+rng.IntN(10)) * 1e6
	base.think = int64(2+rng.IntN(10)) * 1e6
	base.periodic = rng.IntN(4) == 0
	if base.st.lock {
		base.st.leaseNs = int64(40+rng.IntN(120)) * 1e6
	}
	if base.st.visibility != 0 {
		base.st.visibility = int64(30+rng.IntN(150)) * 1e6
	}
	base.dur = base.every*int64(base.count-1) + base.grace + int64(rng.IntN(200))*1e6
	base.laneInsts = 2 + rng.IntN(3)
	for _, e := range []*string{&base.expectDup, &base.expectStale, &base.expectLost} {
		*e = []string{"", "true", "false", "any"}[rng.IntN(4)]
	}
	trials := 1 + rng.IntN(3)
	lanes := 1
	if trials > 1 && rng.IntN(2) == 0 {
		lanes = trials
	}
	base.trials, base.need = trials, 1+rng.IntN(trials)
	var out []*jobCase
	for first := 1; first <= trials; first += lanes {
		jc := *base
		jc.rng = rand.New(rand.NewPCG(rng.Uint64(), uint64(first)))
		jc.trial, jc.lanes = first, lanes
		if lanes > 1 {
			jc.name = fmt.Sprintf("%s.t%d-%d", base.name, first, first+lanes-1)
		} else if trials > 1 {
			jc.name = fmt.Sprintf("%s.t%d", base.name, first)
		}
		jc.drawFaults()
		out = append(out, &jc)
	}
	return out
}

// drawFaults schedules each lane's faults: pauses and kills of an
// instance, at an instant or at a drawn phase of a job, a fault on a
// server or on one instance's link, apart from one another.
func (jc *jobCase) drawFaults() {
	rng := jc.rng
	n := rng.IntN(4)
	for l := 1; l <= jc.lanes; l++ {
		at := int64(20+rng.IntN(100)) * 1e6
		kills := 0
		for k := 0; k < n; k++ {
			f := &jfault{lane: l, at: at}
			name := fmt.Sprintf("f%d", k+1)
			if jc.lanes > 1 {
				name += fmt.Sprintf("@l%d", l)
			}
			f.name = name
			switch p := rng.IntN(10); {
			case p < 5:
				f.typ, f.class, f.dur = "pause", "pause holder", int64(30+rng.IntN(250))*1e6
			case p < 7 && kills < jc.laneInsts-1:
				f.typ, f.class = "kill", "crash client"
				kills++
			case p < 8 && jc.lanes == 1:
				f.typ, f.class, f.dur, f.target = "partition", "partition", int64(20+rng.IntN(80))*1e6, "postgres-1"
			default:
				f.typ, f.class, f.dur = "partition", "partition", int64(20+rng.IntN(80))*1e6
				f.target = fmt.Sprintf("link:postgres-1@instance-%d", (l-1)*jc.laneInsts+1+rng.IntN(jc.laneInsts))
			}
			if f.target == "" {
				switch rng.IntN(3) {
				case 0:
					f.target = fmt.Sprintf("instance-%d", (l-1)*jc.laneInsts+1+rng.IntN(jc.laneInsts))
				default:
					f.aimed = true
					f.phase = []string{"before-effect", "during-effect", "after-effect"}[rng.IntN(3)]
					f.target = "executor@" + f.phase
				}
			}
			f.mark = rng.IntN(30) == 0
			jc.faults = append(jc.faults, f)
			at += f.dur + int64(100+rng.IntN(300))*1e6
		}
	}
}

// simulate runs the case from t0.
func (jc *jobCase) simulate(t0 int64) {
	rng := jc.rng
	jc.start = t0
	jc.stop = t0 + jc.dur
	jc.w = &jworld{}
	jc.locks, jc.done, jc.taken, jc.takenBy = map[string]*jlock{}, map[string]bool{}, map[string]int64{}, map[string]*jattempt{}
	jc.tokens, jc.fenceHi, jc.applied = map[string]uint64{}, map[string]uint64{}, map[string]int{}
	jc.tries = map[string]*jtry{}
	jc.sinkError = !jc.st.lock && rng.IntN(12) == 0
	jc.badLines = rng.IntN(15) == 0
	jc.sinkCut = -1
	if jc.sinkError {
		jc.sinkCut = t0 + rng.Int64N(jc.dur)
	}
	clients := 1 + rng.IntN(2)
	for i := 1; i <= jc.lanes*jc.laneInsts; i++ {
		in := &jinst{n: i, lane: (i-1)/jc.laneInsts + 1, deathT: -1}
		jc.insts = append(jc.insts, in)
		for c := 0; c < clients; c++ {
			cl := &jclient{proc: fmt.Sprintf("i%dc%d", i, c), inst: in, tried: map[string]int64{}}
			jc.clients = append(jc.clients, cl)
		}
	}
	jc.emit(t0, jc.metaLine())
	for _, c := range jc.clients {
		jc.at(t0+rng.Int64N(3e6), c, func() { jc.pick(c) })
	}
	for _, f := range jc.faults {
		jc.at(t0+f.at, nil, func() { jc.fireFault(f) })
	}
	for poll := t0 + 100e6; poll < jc.stop; poll += 100e6 {
		jc.at(poll, nil, func() { jc.readSink() })
	}
	jc.at(jc.stop, nil, func() {
		// The harness heals every fault, and gives up those it could not
		// aim, before it stops the clients.
		for _, f := range jc.faults {
			switch {
			case f.armed:
				f.armed = false
				jc.faultError(f, "no client reached "+f.phase+" before the case ended")
			case f.started && f.end == 0:
				jc.heal(f)
			}
		}
		jc.emit(jc.w.now, newObj(nil).Int("t", jc.w.now).Str("type", "mark").Str("f", "case-stop").End())
		for _, c := range jc.clients {
			c.stop = true
		}
	})
	for jc.w.q.Len() > 0 {
		a := heap.Pop(&jc.w.q).(*jaction)
		jc.w.now = a.t
		if c := a.c; c != nil {
			in := c.inst
			if in.dead {
				continue
			}
			if in.pausedTo > 0 && a.t >= in.pausedFrom && a.t < in.pausedTo {
				jc.at(in.pausedTo+jc.rng.Int64N(2e6), c, a.f) // resumes when the pause ends
				continue
			}
		}
		a.f()
	}
	// The last read, once no client runs; then the harness and the end.
	t := max(jc.w.now, jc.stop) + 1e6
	jc.w.now = t
	jc.readSink()
	jc.w.now += 1e6
	h := newObj(nil).Int("bad_lines", map[bool]int64{true: 1, false: 0}[jc.badLines]).Int("worker_emit_lag_max_ns", 1e6).
		Float("coordinator_cpu_cores", 0.1).Float("workers_cpu_cores", 0.2).Int("cores", 2).
		Int("coordinator_goroutines", 40).Int("coordinator_fds", 30).Int("coordinator_heap_bytes", 8<<20)
	if jc.sinkError {
		h.Str("sink_error", "sink: read effects: connection refused")
	}
	jc.emit(jc.w.now, newObj(nil).Int("t", jc.w.now).Str("type", "mark").Str("f", "harness").Raw("meta", h.End()).End())
	jc.end = jc.w.now + 1
	jc.emit(jc.end, newObj(nil).Int("t", jc.end).Str("type", "mark").Str("f", "case-end").End())
}

// ev is one event line of a client.
func (jc *jobCase) ev(typ, f, proc, key string) *obj {
	return newObj(nil).Int("t", jc.w.now).Str("type", typ).Str("f", f).Str("proc", proc).Str("key", key)
}

func (jc *jobCase) emitObj(o *obj) { jc.emit(jc.w.now, o.End()) }

// metaLine is the case-start mark.
func (jc *jobCase) metaLine() []byte {
	m := newObj(nil)
	m.Str("name", jc.name)
	backend := "postgres"
	if jc.st.lock {
		backend = "redis"
	}
	m.Str("backend", backend).Bool("fenced", true).Int("duration_ns", jc.dur)
	e := newObj(nil)
	var anys []string
	for _, x := range []struct{ name, v string }{{"duplicate_effects", jc.expectDup}, {"stale_effects_accepted", jc.expectStale}, {"lost_jobs", jc.expectLost}} {
		switch x.v {
		case "true", "false":
			e.Bool(x.name, x.v == "true")
		case "any":
			anys = append(anys, x.name)
		}
	}
	if jc.st.lock {
		anys = append(anys, "violations")
	}
	slices.Sort(anys)
	if len(anys) > 0 {
		e.Raw("any", appendStrings(nil, anys))
	}
	m.Raw("expect", e.End())
	if len(jc.faults) > 0 {
		b := []byte{'['}
		for i, f := range jc.faults {
			if i > 0 {
				b = append(b, ',')
			}
			fo := newObj(b).Str("name", f.name).Str("type", f.typ).Str("target", f.target).Int("at_ns", f.at).Int("for_ns", f.dur).Str("class", f.class)
			if jc.lanes > 1 {
				fo.Int("lane", int64(f.lane))
			}
			b = fo.End()
		}
		m.Raw("faults", append(b, ']'))
	}
	m.Int("clients", int64(len(jc.clients))).Int("keys", 1)
	if jc.st.lock {
		m.Int("lease_ns", jc.st.leaseNs)
	} else {
		m.Bool("lockless", true)
	}
	m.Str("row", jc.row).Int("trial", int64(jc.trial)).Int("trials", int64(jc.trials)).Int("need", int64(jc.need))
	if jc.lanes > 1 {
		m.Int("lanes", int64(jc.lanes)).Int("lane_instances", int64(jc.laneInsts))
	}
	j := newObj(nil).Str("strategy", jc.st.name).Int("count", int64(jc.count)).Int("every_ns", jc.every).Int("grace_ns", jc.grace)
	if jc.st.lock {
		j.Bool("lock", true)
	}
	if jc.periodic {
		j.Bool("periodic", true)
	}
	j.Str("variant", jc.st.variant).Str("family", jc.st.family)
	m.Raw("jobs", j.End())
	return newObj(nil).Int("t", jc.start).Str("type", "mark").Str("f", "case-start").Raw("meta", m.End()).End()
}

// Files is the run's history.
func (r *JobsRun) Files() []byte {
	lines := slices.Clone(r.lines)
	slices.SortStableFunc(lines, func(a, b jline) int {
		switch {
		case a.t < b.t:
			return -1
		case a.t > b.t:
			return 1
		}
		return 0
	})
	var out []byte
	for _, l := range lines {
		out = append(append(out, l.b...), '\n')
	}
	return out
}
