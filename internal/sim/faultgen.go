package sim

import (
	"fmt"
	"strings"
)

// This file draws a case's faults: kinds, targets, windows, lanes.

// classOf is the class a fault kind belongs to (history.ClassOrder).
func classOf(kind string) string {
	return map[string]string{fkPauseInst: "pause holder", fkKillInst: "crash client", fkKillSrv: "kill a member",
		fkPauseSrv: "pause server", fkPartition: "partition", fkLatency: "slow network"}[kind]
}

// faults draws the case's scheduled faults. For a case whose trials run
// side by side only faults of one lane's own instances are drawn (a
// server or an unscoped link belongs to every lane); laneFaults copies
// them to each lane.
func (g *gen) faults(c *caseConfig, laned bool) {
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
	nemesis := g.p(0.12)
	if nemesis {
		n = 0
	}
	for i := 0; i < n; i++ {
		p := &faultPlan{outcome: foNormal}
		p.spec.At = at()
		switch k := g.weighted(22, 18, 12, 10, 18, 10, 10); k {
		case 0: // pause an instance, shorter or longer than the lease
			p.kind, p.spec.Type = fkPauseInst, "pause"
			if g.p(0.6) {
				p.insts, p.spec.Target = []int{0}, "holder"
				g.holderOf(c, p)
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
				g.holderOf(c, p)
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
			if laned {
				continue
			}
			p.kind, p.spec.Type, p.srv = fkKillSrv, "kill", srv()
			p.spec.Target = p.srv
			p.spec.For = g.ms(200, 1500)
		case 3:
			if laned {
				continue
			}
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
			case r < 0.55 || (laned && r < 0.78):
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
			if g.p(0.5) && !laned {
				p.links = []linkTarget{{"resource", 0}}
			} else {
				p.links = []linkTarget{{"resource", inst()}}
			}
			p.spec.Target = p.links[0].String()
		}
		plans = append(plans, p)
	}
	if nemesis {
		// a nemesis: several windows of one kind, one after the other or
		// overlapping a little
		kind := []string{fkPauseInst, fkPartition, fkLatency}[g.n(3)]
		k := 3 + g.n(6)
		n := inst()
		t := int64(float64(c.duration) * (0.08 + 0.1*g.f()))
		for i := 0; i < k; i++ {
			p := &faultPlan{outcome: foNormal, kind: kind}
			p.spec.At = t
			p.spec.For = g.ms(80, 400)
			switch kind {
			case fkPauseInst:
				p.spec.Type = "pause"
				if g.p(0.7) {
					p.insts, p.spec.Target = []int{0}, "holder"
				} else {
					p.insts, p.spec.Target = []int{n}, fmt.Sprintf("instance-%d", n)
				}
			default:
				p.spec.Type = map[string]string{fkPartition: "partition", fkLatency: "latency"}[kind]
				p.links = []linkTarget{{srv(), n}}
				if kind == fkLatency {
					p.add = g.ms(50, 300)
				}
				p.spec.Target = p.links[0].String()
			}
			plans = append(plans, p)
			t += p.spec.For + g.ms(-60, 500)
		}
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
	if g.p(0.06) {
		// a fault at or after the stop (too late, MODEL §10), or one
		// whose window runs past it
		p := &faultPlan{outcome: foNormal, late: true}
		if g.p(0.5) {
			n := inst()
			p.kind, p.spec.Type, p.insts, p.spec.Target = fkPauseInst, "pause", []int{n}, fmt.Sprintf("instance-%d", n)
		} else {
			p.kind, p.spec.Type = fkPartition, "partition"
			p.links = []linkTarget{{srv(), inst()}}
			p.spec.Target = p.links[0].String()
		}
		p.spec.For = g.ms(50, 300)
		p.spec.At = c.duration + g.ms(5, 150)
		if g.p(0.35) {
			p.spec.At = c.duration - g.ms(30, 150)
			p.spec.For = g.ms(250, 500)
		}
		plans = append(plans, p)
	}
	// what becomes of each fault
	for i, p := range plans {
		p.spec.Name = fmt.Sprintf("%s-%d", p.spec.Type, i+1)
		p.spec.Class = classOf(p.kind)
		if g.p(0.05) {
			p.spec.Class = "" // no class: the case is "several faults" (MODEL §18)
		}
		if len(p.insts) > 0 && p.insts[0] == 0 && g.p(0.05) {
			// the harness resolved the holder role to an instance that
			// held nothing: the fault missed its aim (MODEL §10)
			p.outcome = foMissedAim
			continue
		}
		if p.kind == fkKillInst && g.p(0.03) {
			// a kill whose process kept running (MODEL §4: it does not act)
			p.outcome = foUnobserved
			continue
		}
		switch g.weighted(86, 2.5, 2, 2, 2.5, 3, 2) {
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
			// the harness saw no effect: a pause that did not stop the
			// process, a kill whose process kept running (MODEL §4: it
			// does not act), a cut that dropped nothing
			p.outcome = foUnobserved
			if p.kind == fkKillSrv || p.kind == fkPauseSrv {
				p.outcome = foNormal
			}
		case 6:
			// a pause or kill marked idle: taken at its word, it did not
			// act (MODEL §4)
			if p.kind == fkPauseInst || p.kind == fkKillInst {
				p.outcome = foIdleMark
			}
		}
	}
	c.faults = plans
}

// holderOf aims a holder fault at the holder of one key (holder-of:kN)
// now and then.
func (g *gen) holderOf(c *caseConfig, p *faultPlan) {
	if c.keys > 1 && g.p(0.35) {
		p.aimKey = fmt.Sprintf("k%d", g.n(c.keys))
		p.spec.Target = "holder-of:" + p.aimKey
	}
}

// laneFaults copies the case's faults (drawn for one lane's instances 1..I)
// to every lane: named <name>@l<l>, with lane l, on the lane's own
// instances (MODEL §14).
func (g *gen) laneFaults(c *caseConfig) {
	var out []*faultPlan
	for l := 1; l <= c.lanes; l++ {
		off := (l - 1) * c.instances
		for _, p := range c.faults {
			q := *p
			q.lane = l
			q.spec.Lane = l
			q.spec.Name = fmt.Sprintf("%s@l%d", p.spec.Name, l)
			if p.spec.Group != "" {
				q.spec.Group = fmt.Sprintf("%s@l%d", p.spec.Group, l)
			}
			if p.aimKey != "" {
				// the lane's own key of the same rank
				var k int
				fmt.Sscanf(p.aimKey, "k%d", &k)
				q.aimKey = fmt.Sprintf("k%d", k+(l-1)*c.keys)
				q.spec.Target = "holder-of:" + q.aimKey
			}
			q.insts = nil
			for _, n := range p.insts {
				if n > 0 {
					n += off
				}
				q.insts = append(q.insts, n)
			}
			q.links = nil
			for _, lt := range p.links {
				if lt.inst > 0 {
					lt.inst += off
				}
				q.links = append(q.links, lt)
			}
			switch {
			case len(p.links) > 0 && strings.Contains(p.spec.Target, "*"):
				q.spec.Target = fmt.Sprintf("link:srv-*@instance-%d", q.links[0].inst)
			case len(p.links) > 0:
				var ts []string
				for _, lt := range q.links {
					ts = append(ts, lt.String())
				}
				q.spec.Target = strings.Join(ts, ",")
			case len(q.insts) > 0 && q.insts[0] != 0:
				var ts []string
				for _, n := range q.insts {
					ts = append(ts, fmt.Sprintf("instance-%d", n))
				}
				q.spec.Target = strings.Join(ts, ",")
			}
			out = append(out, &q)
		}
	}
	c.faults = out
}
