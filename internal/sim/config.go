package sim

import (
	"fmt"
	"math/rand/v2"
	"strings"
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
	thresholds       bool   // pass/fail criteria on the case's counts
	tokenZero        bool   // an unfenced backend writes "token":0
	noCaseEnd        bool   // the case-end mark is missing: the next case-start cuts it short

	keyList []string
}

func (c *caseConfig) keyNames() []string {
	if c.keyList == nil {
		for i := 0; i < c.keys; i++ {
			c.keyList = append(c.keyList, fmt.Sprintf("k%d", i))
		}
	}
	return c.keyList
}

func (c *caseConfig) meta() CaseMeta {
	m := CaseMeta{Name: c.name, Backend: c.backend, Fenced: c.fenced, DurationNs: c.duration,
		Expect: c.expect, Clients: c.clientsPer, Keys: c.keys, LeaseNs: c.lease, OpTimeoutNs: c.opTimeout,
		Row: c.row, Trial: c.trial, Trials: c.trials, Need: c.need, Misuse: c.misuse, Control: c.control}
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
func (g *gen) span(lo, hi int64) int64  { return lo + g.rng.Int64N(hi-lo+1) }
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

// plan lays out the run's cases.
func (r *Run) plan(rng *rand.Rand) []*caseConfig {
	g := &gen{rng}
	var out []*caseConfig
	single := func(i int) {
		c := g.randomCase(fmt.Sprintf("c%d", i))
		out = append(out, c)
	}
	if g.p(0.6) {
		n := 1 + g.n(3)
		for i := 1; i <= n; i++ {
			single(i)
		}
		return out
	}
	if g.p(0.3) {
		single(1)
	}
	T := 2 + g.n(3)
	N := 1 + g.n(T)
	base := g.randomCase("row")
	name := "row-" + base.variant
	base.name = name
	skip := -1
	if g.p(0.25) {
		skip = 1 + g.n(T) // an interrupted run: a trial missing
		if g.p(0.5) {
			skip = T
		}
	}
	for tr := 1; tr <= T; tr++ {
		if tr == skip {
			continue
		}
		c := base.clone(rng.Uint64())
		c.row, c.trial, c.trials, c.need = name, tr, T, N
		if g.p(0.04) {
			c.need = N%T + 1 // trials that disagree on N
			if c.need == N {
				c.trials = T + 1
			}
		}
		if g.p(0.04) && tr > 1 {
			c.trial = tr - 1 // a trial number repeated
		}
		g.rollProblems(c, 0.15)
		out = append(out, c)
	}
	if g.p(0.3) {
		single(len(out) + 1)
	}
	return out
}

// randomCase draws a case.
func (g *gen) randomCase(name string) *caseConfig {
	c := &caseConfig{seed: g.rng.Uint64(), name: name}
	c.variant = Variants[g.weighted(40, 12, 12, 12, 12, 12)]
	c.backend = map[string]string{Correct: "sim-lease", GrantWhileHeld: "sim-gwh", NoExpiry: "sim-noexpiry",
		ReleaseOther: "sim-relother", TokenReset: "sim-tokreset", LateLost: "sim-latelost"}[c.variant]
	c.control = c.variant != Correct && c.variant != NoExpiry
	c.fenced = g.p(0.8) || c.variant == TokenReset
	c.tokenZero = !c.fenced && g.p(0.5)
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
	if g.p(0.3) && c.lease > 0 {
		c.extendEvery = c.lease / 3
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
	}
	c.cleanupAfterLostP = 0.5
	if g.p(0.15) {
		c.reentrantP = 0.1
	}
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
	g.faults(c)
	g.expectations(c)
	if g.p(0.6) {
		c.harness = "ok"
	}
	c.thresholds = g.p(0.3)
	g.rollProblems(c, 0.25)
	return c
}

// faults draws the case's scheduled faults.
func (g *gen) faults(c *caseConfig) {
	n := g.weighted(25, 30, 25, 12, 8)
	killed := 0
	var plans []*faultPlan
	at := func() int64 { return int64(float64(c.duration) * (0.12 + 0.5*g.f())) }
	lease := c.lease
	if lease == 0 {
		lease = 600e6
	}
	inst := func() int { return 1 + g.n(c.instances) }
	used := min(c.keys, c.servers) // servers some key lives on
	srv := func() string { return fmt.Sprintf("srv-%d", 1+g.n(used)) }
	for i := 0; i < n; i++ {
		p := &faultPlan{outcome: foNormal}
		p.spec.At = at()
		switch k := g.weighted(22, 18, 12, 10, 18, 10, 10); k {
		case 0: // pause an instance, shorter or longer than the lease
			p.kind, p.spec.Type = fkPauseInst, "pause"
			if g.p(0.6) {
				p.insts, p.spec.Target = []int{0}, "holder"
			} else {
				n := inst()
				p.insts, p.spec.Target = []int{n}, fmt.Sprintf("instance-%d", n)
			}
			if g.p(0.5) {
				p.spec.For = int64(float64(lease) * (0.1 + 0.5*g.f()))
			} else {
				p.spec.For = int64(float64(lease) * (1.3 + 1.2*g.f()))
			}
		case 1: // kill instances
			if killed >= c.instances-1 {
				continue
			}
			p.kind, p.spec.Type = fkKillInst, "kill"
			switch {
			case g.p(0.5):
				p.insts, p.spec.Target = []int{0}, "holder"
				killed++
			case c.instances-killed >= 3 && g.p(0.25):
				a := inst()
				b := a%c.instances + 1
				p.insts, p.spec.Target = []int{a, b}, fmt.Sprintf("instance-%d,instance-%d", a, b)
				killed += 2
			default:
				n := inst()
				p.insts, p.spec.Target = []int{n}, fmt.Sprintf("instance-%d", n)
				killed++
			}
			if g.p(0.3) {
				p.spec.For = g.ms(50, 400)
			}
		case 2: // kill a server (restarts when the window ends)
			p.kind, p.spec.Type, p.srv = fkKillSrv, "kill", srv()
			p.spec.Target = p.srv
			p.spec.For = g.ms(200, 1500)
		case 3:
			p.kind, p.spec.Type, p.srv = fkPauseSrv, "pause", srv()
			p.spec.Target = p.srv
			p.spec.For = g.ms(100, 1000)
		case 4, 5: // a link fault
			p.kind, p.spec.Type = fkPartition, "partition"
			if k == 5 {
				p.kind, p.spec.Type = fkLatency, "latency"
				p.add = g.ms(50, 400)
			}
			p.spec.For = g.ms(200, 1500)
			n := inst()
			switch r := g.f(); {
			case r < 0.55:
				p.links = []linkTarget{{srv(), n}}
			case r < 0.78:
				p.links = []linkTarget{{srv(), 0}}
			case r < 0.94 && c.servers > 1:
				p.links = []linkTarget{{"srv-1", n}, {"srv-2", n}} // every way out of instance n
			default:
				p.links = []linkTarget{{"srv-" + fmt.Sprint(c.servers+1), n}} // a server nobody uses: idle
			}
			var ts []string
			for _, l := range p.links {
				ts = append(ts, l.String())
			}
			p.spec.Target = strings.Join(ts, ",")
			if len(p.links) == 2 && g.p(0.5) {
				p.spec.Target = fmt.Sprintf("link:srv-*@instance-%d", n)
			}
		case 6: // the protected resource's link
			if !c.resource {
				continue
			}
			p.kind, p.spec.Type = fkPartition, "partition"
			if g.p(0.4) {
				p.kind, p.spec.Type = fkLatency, "latency"
				p.add = c.opTimeout + g.ms(20, 200)
			}
			p.spec.For = g.ms(200, 1000)
			if g.p(0.5) {
				p.links = []linkTarget{{"resource", 0}}
			} else {
				p.links = []linkTarget{{"resource", inst()}}
			}
			p.spec.Target = p.links[0].String()
		}
		plans = append(plans, p)
	}
	for _, p := range plans {
		if lim := c.duration * 8 / 10; p.spec.At+p.spec.For > lim {
			p.spec.At = max(lim-p.spec.For, c.duration/20)
		}
	}
	// groups, overlaps and back-to-back faults
	switch r := g.f(); {
	case r < 0.12 && c.servers > 1:
		// an implicit group: the same cut on both ways out of one instance
		n := inst()
		a := g.pick("partition", "latency")
		t := at()
		for s := 1; s <= 2; s++ {
			p := &faultPlan{outcome: foNormal, kind: map[string]string{"partition": fkPartition, "latency": fkLatency}[a]}
			p.spec = FaultSpec{Type: a, At: t + g.ms(0, 50), For: g.ms(300, 1000)}
			if a == "latency" {
				p.add = g.ms(50, 300)
			}
			p.links = []linkTarget{{fmt.Sprintf("srv-%d", s+c.servers-1), n}}
			if s == 1 {
				p.links = []linkTarget{{"srv-1", n}}
			}
			p.spec.Target = p.links[0].String()
			plans = append(plans, p)
		}
	case r < 0.2:
		// a declared group: different kinds of cut, one disturbance
		n := inst()
		t := at()
		grp := g.pick("cut-out", "isolate")
		p1 := &faultPlan{outcome: foNormal, kind: fkPartition, links: []linkTarget{{"srv-1", n}}}
		p1.spec = FaultSpec{Type: "partition", Target: p1.links[0].String(), At: t, For: g.ms(300, 900), Group: grp}
		p2 := &faultPlan{outcome: foNormal, kind: fkLatency, add: g.ms(50, 300), links: []linkTarget{{fmt.Sprintf("srv-%d", c.servers+1), n}}}
		p2.spec = FaultSpec{Type: "latency", Target: p2.links[0].String(), At: t + g.ms(0, 100), For: g.ms(300, 900), Group: grp}
		if g.p(0.3) {
			p1.links[0].srv = fmt.Sprintf("srv-%d", c.servers+1) // both idle: nothing excuses either
			p1.spec.Target = p1.links[0].String()
		}
		plans = append(plans, p1, p2)
	case r < 0.32 && len(plans) >= 1:
		// back to back
		p0 := plans[g.n(len(plans))]
		if p0.kind != fkKillInst {
			q := *p0
			q.links = append([]linkTarget(nil), p0.links...)
			q.insts = append([]int(nil), p0.insts...)
			if q.kind == fkKillInst || q.kind == fkPauseInst {
				q.insts, q.spec.Target = []int{1}, "instance-1"
			}
			q.spec.At = p0.spec.At + p0.spec.For + g.ms(0, 3)
			plans = append(plans, &q)
		}
	case r < 0.42 && len(plans) >= 1:
		// overlapping
		p0 := plans[g.n(len(plans))]
		if p0.spec.For > 100e6 {
			q := &faultPlan{outcome: foNormal, kind: fkPartition, links: []linkTarget{{"srv-1", 1 + g.n(c.instances)}}}
			q.spec = FaultSpec{Type: "partition", Target: q.links[0].String(), At: p0.spec.At + p0.spec.For/2, For: g.ms(200, 800)}
			plans = append(plans, q)
		}
	}
	// every window ends well before the stop
	for _, p := range plans {
		if lim := c.duration * 8 / 10; p.spec.At+p.spec.For > lim {
			p.spec.For = max(lim-p.spec.At, 50e6)
		}
	}
	// what becomes of each fault
	for i, p := range plans {
		p.spec.Name = fmt.Sprintf("%s-%d", p.spec.Type, i+1)
		switch g.weighted(88, 2.5, 2, 2, 2.5, 3) {
		case 1:
			p.outcome = foError
		case 2:
			p.outcome = foNeverFired
		case 3:
			if p.kind != fkPauseInst && p.kind != fkKillInst {
				p.outcome = foNeverHealed
			}
		case 4:
			if p.kind != fkPauseInst {
				p.outcome = foHealFails
				p.lingers = g.ms(100, 1500)
				if g.p(0.3) {
					p.lingers = never
				}
			}
		case 5:
			if p.kind == fkPauseInst || p.kind == fkPartition || p.kind == fkLatency {
				p.outcome = foUnobserved
			}
		}
	}
	c.faults = plans
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
			// one key, and a dead holder to show it: every fault is
			// judged against every key (MODEL §11)
			c.keys = 1
			at := int64(float64(c.duration) * (0.15 + 0.2*g.f()))
			if g.p(0.3) {
				// too late to show it: fewer than 2 s of the case remain
				at = c.duration - g.ms(700, 1700)
			}
			c.faults = []*faultPlan{{outcome: foNormal, kind: fkKillInst, insts: []int{0},
				spec: FaultSpec{Type: "kill", Target: "holder", At: at}}}
			if g.p(0.3) {
				// a later fault while it stays blocked
				p := &faultPlan{outcome: foNormal, kind: fkPartition, links: []linkTarget{{"srv-1", 0}}}
				p.spec = FaultSpec{Type: "partition", Target: "link:srv-1", At: c.faults[0].spec.At + g.ms(300, 800), For: g.ms(200, 500)}
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
			spec: FaultSpec{Type: "kill", Target: "holder", At: int64(float64(c.duration) * (0.15 + 0.3*g.f()))}})
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
	}
	if g.p(0.1) && len(c.faults) > 0 && e.Available == nil {
		e.Available = bp(true)
	}
	if c.fenced && c.resource && g.p(0.1) {
		e.LostUpdates = bp(g.p(0.5))
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
	if c.harness != "" {
		c.harness = "ok"
	}
	if !g.p(p) {
		return
	}
	kinds := []string{"early-stop", "no-stop", "unexplained-crash", "hang-at-stop", "backdate-inert", "backdate-op", "early-event",
		"stray-mark", "stray-completion", "dup-start", "harness", "res-fail-outside", "late-outside", "no-work", "no-case-end"}
	k := kinds[g.n(len(kinds))]
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
	}
}
