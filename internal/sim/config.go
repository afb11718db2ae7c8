package sim

import (
	"fmt"
	"math/rand/v2"
)

// caseConfig is everything that shapes one simulated case.
type caseConfig struct {
	seed                      uint64
	name, backend, variant    string
	fenced                    bool
	lease                     int64
	duration                  int64
	opTimeout, acquireTimeout int64
	instances, clientsPer     int
	keys, servers             int
	holdMin, holdMax          int64
	thinkMin, thinkMax        int64
	retryBase, retryMax       int64
	longHoldP                 float64
	validityTimer             bool
	validityMargin            int64
	extendEvery               int64
	notify, freeOnDeath       bool
	resource                  bool
	wrongTokenP               float64
	cleanupAfterLostP         float64
	reentrantP                float64
	misP                      float64
	dyingMax                  int64
	faults                    []*faultPlan
	expect                    Expect
	row                       string
	trial, trials, need       int
	control                   bool
	misuse                    []string

	// validity problems (MODEL §12) that are not faults
	stopMode         string // "", early, none
	unexplainedCrash bool
	hangAtStop       bool
	backdate         string // "", inert, op, early
	malformed        string // "", stray-mark, stray-completion, dup-start
	harness          string // "", ok, bad-lines, emit-lag, coord-cpu, total-cpu
	resFailOutside   bool
	lateOutside      bool
	blocked          bool
	problem          string // what was injected, for the report
	thresholds       bool   // pass/fail criteria on the case's figures
	tokenZero        bool   // an unfenced backend writes "token":0
	noCaseEnd        bool   // the case-end mark is missing: the next case-start cuts it short

	// side by side (MODEL §14): lanes lanes of `instances` instances and
	// `keys` keys each; 0: one case, no lanes
	lanes int
	// tick > 0: every client action and message lands on a grid of tick
	// ns, so that events share timestamps (MODEL §2: equal times happen
	// in file order); marks of the coordinator stay off the grid.
	tick int64
	// queue: the service keeps a refused acquire waiting (as a lock
	// recipe's watch does) and grants it as soon as the key is free.
	queue        bool
	expiryBound  int64 // meta expiry_bound_ns (MODEL §2, §11)
	leaseRenewed bool  // meta lease_renewed (MODEL §6)
	sweep        *SweepPoint
	// keepAfterRefusedExtend: a refused extension does not end the
	// client's belief (a zombie by MODEL §6 rule 3)
	keepAfterRefusedExtend bool
	// unsentP: the client's own check refuses a request before it is
	// sent, with this probability; refuseDials: a partition refuses the
	// dial (a reject rule) instead of dropping what crosses it. Either
	// way the request surely never reached the service: unsent (MODEL A1).
	unsentP     float64
	refuseDials bool
	// strangerWrongP: a client that holds nothing sends a wrong-token
	// release of a key (MODEL §6 rule 4 when the service accepts it)
	strangerWrongP float64
	afterEnd       bool // an event after the case-end (MODEL §2)
	// ownKeys: each client has a key of its own: nobody waits for
	// another's, so no hand-off happens (MODEL §15: no value)
	ownKeys     bool
	outsideInst bool // an event of an instance beyond the lanes (§14)
	foreignKey  bool // a client's event on another lane's key (§14)

	keyList []string
}

// totalInstances: every instance of the case, of every lane.
func (c *caseConfig) totalInstances() int { return max(c.lanes, 1) * c.instances }

// laneOf is the lane of instance n (0 without lanes).
func (c *caseConfig) laneOf(n int) int {
	if c.lanes == 0 {
		return 0
	}
	return (n-1)/c.instances + 1
}

// keyLane is the lane of a key: k((l−1)·K) .. k(l·K−1) are lane l's; 0
// for a key of no lane (or a case without lanes).
func (c *caseConfig) keyLane(key string) int {
	var k int
	if c.lanes == 0 {
		return 0
	}
	if _, err := fmt.Sscanf(key, "k%d", &k); err != nil || k < 0 || k >= c.lanes*c.keys {
		return 0
	}
	return k/c.keys + 1
}

// laneKeys: the keys of lane l (every key without lanes).
func (c *caseConfig) laneKeys(l int) []string {
	all := c.keyNames()
	if l == 0 {
		return all
	}
	return all[(l-1)*c.keys : l*c.keys]
}

func (c *caseConfig) keyNames() []string {
	if c.keyList == nil {
		for i := 0; i < c.keys*max(c.lanes, 1); i++ {
			c.keyList = append(c.keyList, fmt.Sprintf("k%d", i))
		}
	}
	return c.keyList
}

func (c *caseConfig) meta() CaseMeta {
	m := CaseMeta{Name: c.name, Backend: c.backend, Fenced: c.fenced, DurationNs: c.duration,
		Expect: c.expect, Clients: c.clientsPer, Keys: c.keys, LeaseNs: c.lease, OpTimeoutNs: c.opTimeout,
		Row: c.row, Trial: c.trial, Trials: c.trials, Need: c.need, Misuse: c.misuse, Control: c.control,
		LeaseRenewed: c.leaseRenewed, ExpiryBoundNs: c.expiryBound, Sweep: c.sweep}
	if c.lanes > 0 {
		m.Lanes, m.LaneInstances = c.lanes, c.instances
	}
	for _, f := range c.faults {
		m.Faults = append(m.Faults, f.spec)
	}
	return m
}

func (c *caseConfig) clone(seed uint64) *caseConfig {
	d := *c
	d.seed = seed
	d.keyList = nil
	d.faults = nil
	for _, f := range c.faults {
		g := *f
		d.faults = append(d.faults, &g)
	}
	return &d
}

type gen struct{ rng *rand.Rand }

func (g *gen) f() float64               { return g.rng.Float64() }
func (g *gen) p(p float64) bool         { return g.rng.Float64() < p }
func (g *gen) n(n int) int              { return g.rng.IntN(n) }
func (g *gen) pick(ss ...string) string { return ss[g.rng.IntN(len(ss))] }
func (g *gen) ms(lo, hi float64) int64  { return int64((lo + (hi-lo)*g.f()) * 1e6) }
func (g *gen) weighted(ws ...float64) int { // index by weight
	t := 0.0
	for _, w := range ws {
		t += w
	}
	x := g.f() * t
	for i, w := range ws {
		if x < w {
			return i
		}
		x -= w
	}
	return len(ws) - 1
}

// plan lays out the run's cases: single cases, a row of trials run one
// after the other, a row of trials side by side (lanes), or a swept case
// (rows that measure, one per point of the sweep).
func (r *Run) plan(rng *rand.Rand) []*caseConfig {
	g := &gen{rng}
	var out []*caseConfig
	single := func(i int) {
		out = append(out, g.randomCase(fmt.Sprintf("c%d", i), false))
	}
	switch x := g.f(); {
	case x < 0.5:
		n := 1 + g.n(3)
		for i := 1; i <= n; i++ {
			single(i)
		}
		return out
	case x < 0.72:
		if g.p(0.3) {
			single(1)
		}
		out = append(out, g.row(rng, "row", false, nil)...)
	case x < 0.88:
		if g.p(0.2) {
			single(1)
		}
		out = append(out, g.row(rng, "lanes", true, nil)...)
	default:
		out = append(out, g.sweep(rng)...)
	}
	if g.p(0.3) {
		single(len(out) + 1)
	}
	return out
}

// row draws the trials of one row: one case per trial, or batches of
// trials side by side.
func (g *gen) row(rng *rand.Rand, prefix string, laned bool, base *caseConfig) []*caseConfig {
	var out []*caseConfig
	T := 2 + g.n(3)
	N := 1 + g.n(T)
	if base == nil {
		base = g.randomCase(prefix, laned)
		if g.p(0.25) {
			base.expect = Expect{Measure: true, Note: "a point: how often"}
			if g.p(0.3) {
				base.expect.Violations = bp(false) // ignored beside measure (MODEL §13)
			}
		}
	}
	name := prefix + "-" + base.variant
	if base.sweep != nil {
		name = base.name
	}
	base.name = name
	skip := -1
	if g.p(0.2) {
		skip = 1 + g.n(T) // an interrupted run: a trial missing
		if g.p(0.5) {
			skip = T
		}
	}
	if !laned {
		for tr := 1; tr <= T; tr++ {
			if tr == skip {
				continue
			}
			c := base.clone(rng.Uint64())
			c.row, c.trial, c.trials, c.need = name, tr, T, N
			if g.p(0.03) {
				c.need = N%T + 1 // trials that disagree on N
				if c.need == N {
					c.trials = T + 1
				}
			}
			if g.p(0.03) && tr > 1 {
				c.trial = tr - 1 // a trial number repeated
			}
			g.rollProblems(c, 0.12)
			out = append(out, c)
		}
		return out
	}
	// side by side: one batch of every trial, or two batches
	batches := [][2]int{{1, T}}
	if T >= 3 && g.p(0.4) {
		k := 1 + g.n(T-1)
		batches = [][2]int{{1, k}, {k + 1, T}}
	}
	for _, b := range batches {
		lanes := b[1] - b[0] + 1
		if skip >= b[0] && skip <= b[1] && skip == b[1] && lanes > 1 {
			lanes-- // the last lane of the batch did not run
		}
		c := base.clone(rng.Uint64())
		c.lanes = lanes
		c.row, c.trial, c.trials, c.need = name, b[0], T, N
		g.laneFaults(c)
		g.rollProblems(c, 0.12)
		if g.p(0.1) {
			c.outsideInst = true
		}
		if g.p(0.1) {
			c.foreignKey = true
		}
		out = append(out, c)
	}
	return out
}

// sweep draws a swept case: a pause of the holder for x times the lease,
// one row of trials that measure per point (MODEL §17: a safety envelope).
func (g *gen) sweep(rng *rand.Rand) []*caseConfig {
	laned := g.p(0.6)
	base := g.randomCase("sweep", laned)
	base.name = "sweep-" + base.variant
	if base.lease == 0 {
		base.lease = g.ms(250, 600)
	}
	base.expectBase()
	xs := []float64{0.5, 1.5, 3}
	if g.p(0.5) {
		xs = []float64{0.25, 1, 2, 4}
	}
	n := 2 + g.n(len(xs)-1)
	var out []*caseConfig
	for i := 0; i < n; i++ {
		x := xs[i]
		c := base.clone(rng.Uint64())
		v := fmt.Sprintf("%g×lease", x)
		c.sweep = &SweepPoint{Case: base.name, Labels: []string{"for"}, Values: []string{v}, X: []float64{x}}
		c.name = base.name + "/for=" + v
		c.expect = Expect{Measure: true, Note: "a point of the envelope"}
		p := &faultPlan{outcome: foNormal, kind: fkPauseInst, insts: []int{0}}
		p.spec = FaultSpec{Name: "pause-1", Type: "pause", Target: "holder", At: c.duration / 3, For: int64(x * float64(c.lease)), Class: "pause holder"}
		c.faults = []*faultPlan{p}
		if g.p(0.3) {
			// a second window later in the case: two exposures
			q := *p
			q.spec.Name, q.spec.At = "pause-2", c.duration*2/3
			c.faults = append(c.faults, &q)
		}
		out = append(out, g.row(rng, c.name, laned, c)...)
	}
	return out
}

// expectBase clears what a swept case's base drew for its own faults.
func (c *caseConfig) expectBase() {
	c.expect = Expect{}
	c.faults = nil
}

// randomCase draws a case (laned: its trials will run side by side).
func (g *gen) randomCase(name string, laned bool) *caseConfig {
	c := &caseConfig{seed: g.rng.Uint64(), name: name}
	c.variant = Variants[g.weighted(40, 12, 12, 12, 12, 12)]
	c.backend = map[string]string{Correct: "sim-lease", GrantWhileHeld: "sim-gwh", NoExpiry: "sim-noexpiry",
		ReleaseOther: "sim-relother", TokenReset: "sim-tokreset", LateLost: "sim-latelost"}[c.variant]
	c.control = c.variant != Correct && c.variant != NoExpiry
	c.fenced = g.p(0.8) || c.variant == TokenReset
	c.tokenZero = !c.fenced && g.p(0.5)
	if !c.fenced {
		// a backend either issues tokens or does not (MODEL §18: "unsafe,
		// unfenced" is a backend's): one without is a backend of its own
		c.backend += "-nt"
	}
	c.lease = g.ms(250, 1200)
	if (c.variant == Correct && g.p(0.12)) || (c.variant == NoExpiry && g.p(0.4)) {
		c.lease = 0
	}
	if c.variant == LateLost && c.lease == 0 {
		c.lease = g.ms(300, 1000)
	}
	c.duration = g.ms(4500, 8000)
	c.opTimeout = g.ms(100, 400)
	c.acquireTimeout = g.ms(500, 2500)
	c.instances = 2 + g.n(3)
	c.clientsPer = 1 + g.n(2)
	c.keys = 1 + g.n(3)
	c.servers = 1 + g.n(2)
	if laned {
		c.duration = g.ms(3500, 6000)
		c.instances = 2 + g.n(2)
		c.keys = 1 + g.n(2)
	}
	c.holdMin = g.ms(3, 15)
	c.holdMax = c.holdMin + g.ms(5, 60)
	c.thinkMin = g.ms(2, 20)
	c.thinkMax = c.thinkMin + g.ms(10, 80)
	c.retryBase = g.ms(2, 10)
	c.retryMax = g.ms(40, 100)
	if g.p(0.3) {
		c.longHoldP = 0.03 + 0.12*g.f()
		c.misuse = append(c.misuse, "work longer than the lease")
	}
	c.validityTimer = g.p(0.6)
	c.validityMargin = int64(float64(c.lease) * 0.05 * g.f())
	if (g.p(0.3) || (c.variant == LateLost && g.p(0.5))) && c.lease > 0 {
		c.extendEvery = c.lease / 3
		if g.p(0.4) {
			c.extendEvery = max(c.holdMax/3, 2e6) // extensions inside ordinary holds
		}
	}
	c.notify = g.p(0.5)
	c.freeOnDeath = g.p(0.6) || (c.lease == 0 && c.variant == Correct)
	if c.variant == NoExpiry {
		c.freeOnDeath = false
	}
	c.resource = g.p(0.6)
	if g.p(0.2) || c.variant == ReleaseOther {
		c.wrongTokenP = 0.05 + 0.15*g.f()
		c.misuse = append(c.misuse, "wrong-token release")
		if g.p(0.5) {
			c.strangerWrongP = 0.02 + 0.08*g.f()
		}
	}
	c.cleanupAfterLostP = 0.5
	if g.p(0.15) {
		c.reentrantP = 0.1
	}
	c.keepAfterRefusedExtend = g.p(0.3)
	switch c.variant {
	case GrantWhileHeld:
		c.misP = 0.05 + 0.3*g.f()
	case ReleaseOther:
		c.misP = 0.2 + 0.5*g.f()
		c.longHoldP = max(c.longHoldP, 0.05)
	case LateLost:
		c.misP = 0.05 + 0.2*g.f()
	}
	if g.p(0.5) {
		c.dyingMax = g.ms(0.5, 8)
	}
	if g.p(0.25) {
		c.tick = []int64{1e3, 1e6, 1e6, 2e6}[g.n(4)]
	}
	c.queue = g.p(0.3)
	switch {
	case c.lease > 0 && g.p(0.5):
		c.expiryBound = c.lease
	case c.lease > 0 && g.p(0.5):
		c.expiryBound = 2 * c.lease
	case c.lease == 0 && c.freeOnDeath && g.p(0.5):
		c.expiryBound = 20e6
	}
	c.leaseRenewed = g.p(0.1)
	if !laned && g.p(0.05) {
		c.ownKeys = true
		c.keys = c.instances * c.clientsPer
	}
	g.faults(c, laned)
	g.expectAll(c)
	if g.p(0.6) {
		c.harness = "ok"
	}
	c.thresholds = g.p(0.35)
	if !laned {
		g.rollProblems(c, 0.25)
	}
	if g.p(0.3) {
		c.unsentP = 0.02 + 0.1*g.f()
	}
	c.refuseDials = g.p(0.4)
	return c
}

func (g *gen) expectations(c *caseConfig) {
	e := &c.expect
	switch c.variant {
	case GrantWhileHeld, ReleaseOther, LateLost:
		if g.p(0.5) {
			e.Violations = bp(true)
			e.Note = "a known-unsafe control must show violations"
		}
	case TokenReset:
		if g.p(0.3) {
			e.Violations = bp(g.p(0.5))
		}
		if g.p(0.3) {
			e.StaleAccepted = bp(g.p(0.5))
		}
	case NoExpiry:
		if c.lease == 0 && g.p(0.6) {
			e.Available = bp(false)
			e.Note = "a dead holder of a lock without a lease blocks it for good"
			// a dead holder to show it: each fault is judged on the keys
			// it took down (MODEL §11); other keys serve meanwhile
			if g.p(0.4) {
				c.keys = 1
			}
			at := int64(float64(c.duration) * (0.15 + 0.2*g.f()))
			if g.p(0.3) {
				// too late to show it: fewer than 2 s of the case remain
				at = c.duration - g.ms(700, 1700)
			}
			c.faults = []*faultPlan{{outcome: foNormal, kind: fkKillInst, insts: []int{0},
				spec: FaultSpec{Type: "kill", Target: "holder", At: at, Class: "crash client"}}}
			if g.p(0.5) {
				// a later fault while it stays blocked: it took down
				// every key (no instance target)
				p := &faultPlan{outcome: foNormal, kind: fkPartition, links: []linkTarget{{"srv-1", 0}}}
				p.spec = FaultSpec{Type: "partition", Target: "link:srv-1", At: c.faults[0].spec.At + g.ms(300, 800), For: g.ms(200, 500), Class: "partition"}
				c.faults = append(c.faults, p)
			}
		}
	case Correct:
		if g.p(0.1) {
			e.Violations = bp(true)
		}
	}
	if c.variant == NoExpiry && e.Available == nil && g.p(0.6) {
		// a dead holder the service never frees: the lock stays blocked
		c.faults = append(c.faults, &faultPlan{outcome: foNormal, kind: fkKillInst, insts: []int{0},
			spec: FaultSpec{Type: "kill", Target: "holder", At: int64(float64(c.duration) * (0.15 + 0.3*g.f())), Class: "crash client"}})
		if c.keys > 1 && g.p(0.5) {
			c.keys = 1
		}
	}
	if g.p(0.1) {
		e.Violations = bp(false)
	}
	if g.p(0.15) {
		e.MaxGapNs = g.ms(200, 3000)
	}
	if g.p(0.2) && len(c.faults) > 0 {
		e.RecoversWithinNs = g.ms(300, 2500)
		if g.p(0.4) {
			// a bound tighter than the lock's own recovery: unmet although
			// served, a refused stretch longer than B before the service
			e.RecoversWithinNs = g.ms(20, 300)
		}
	}
	if g.p(0.1) && len(c.faults) > 0 && e.Available == nil {
		e.Available = bp(true)
	}
	if c.fenced && c.resource && g.p(0.1) {
		e.LostUpdates = bp(g.p(0.5))
	}
	if !e.Measure && g.p(0.1) {
		// outcomes the lock does not promise either way (MODEL §13)
		for _, o := range []struct {
			name  string
			unset bool
		}{{"violations", e.Violations == nil}, {"stale_writes_accepted", e.StaleAccepted == nil}, {"available", e.Available == nil}} {
			if o.unset && g.p(0.5) {
				e.Any = append(e.Any, o.name)
			}
		}
	}
	// renumber the faults added here
	for i, p := range c.faults {
		p.spec.Name = fmt.Sprintf("%s-%d", p.spec.Type, i+1)
	}
}

// rollProblems draws, with probability p, one of MODEL §12's validity
// problems that is not a fault.
func (g *gen) rollProblems(c *caseConfig, p float64) {
	c.stopMode, c.unexplainedCrash, c.hangAtStop, c.backdate, c.malformed = "", false, false, "", ""
	c.resFailOutside, c.lateOutside, c.blocked, c.problem, c.noCaseEnd = false, false, false, "", false
	c.afterEnd = false
	if c.harness != "" {
		c.harness = "ok"
	}
	if !g.p(p) {
		return
	}
	kinds := []string{"early-stop", "no-stop", "unexplained-crash", "hang-at-stop", "backdate-inert", "backdate-op", "early-event",
		"stray-mark", "stray-completion", "dup-start", "harness", "res-fail-outside", "late-outside", "no-work", "no-case-end", "after-end"}
	k := kinds[g.n(len(kinds))]
	if c.lanes > 0 && k == "after-end" {
		// after the case-end: which lane such an event breaks is not said
		// (an event out of order, early or not, makes every lane
		// unreadable, MODEL §14)
		k = "stray-completion"
	}
	c.problem = k
	switch k {
	case "early-stop":
		c.stopMode = "early"
	case "no-stop":
		c.stopMode = "none"
	case "unexplained-crash":
		c.unexplainedCrash = true
	case "hang-at-stop":
		c.hangAtStop = true
	case "backdate-inert":
		c.backdate = "inert"
	case "backdate-op":
		c.backdate = "op"
	case "early-event":
		c.backdate = "early"
	case "stray-mark", "stray-completion", "dup-start":
		c.malformed = k
	case "harness":
		pausing := false
		for _, f := range c.faults {
			if f.kind == fkPauseInst {
				pausing = true
			}
		}
		c.harness = g.pick("bad-lines", "coord-cpu", "total-cpu")
		if !pausing && g.p(0.4) {
			c.harness = "emit-lag"
		}
	case "res-fail-outside":
		c.resFailOutside = true
	case "late-outside":
		if c.resource {
			c.lateOutside = true
		} else {
			c.resFailOutside = true
		}
	case "no-work":
		c.blocked = true
	case "no-case-end":
		c.noCaseEnd = true
	case "after-end":
		c.afterEnd = true
	}
}
