package sim

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"
)

// A third reading of MODEL §8, by exhaustive search, on histories small
// enough to search: every order of the operations' instants that real
// time allows (an unknown operation may also never take effect), each
// instant as early as its rules allow (every rule of §8 only gets easier
// later). The proofs must hold under every reading the search knows; the
// witness under its own.

type reading struct {
	lenientR    bool // R(g) read leniently
	literalFail bool // a refused release/extension frees the key, whoever held it
}

func (x *evalCtx) brute(los []*linOp, rd reading, fenced bool) bool {
	lease := x.cr.meta.LeaseNs
	n := len(los)
	type st struct {
		holder string
		e, r   int64
		tok    uint64
	}
	placed := make([]bool, n)
	var dfs func(done int, t int64, s st) bool
	dfs = func(done int, t int64, s st) bool {
		if done == n {
			return true
		}
		// every remaining definite operation must still fit; unknown
		// ones may be dropped
		allUnknown := true
		for i, lo := range los {
			if !placed[i] && lo.outcome != "unknown" {
				allUnknown = false
				if lo.comp < t {
					return false
				}
			}
		}
		if allUnknown {
			return true
		}
		for i, lo := range los {
			if placed[i] {
				continue
			}
			// real time: nothing unplaced must have completed before i began
			ok := true
			for j, o := range los {
				if !placed[j] && j != i && o.outcome != "unknown" && o.comp < lo.inv {
					ok = false
				}
			}
			if !ok {
				continue
			}
			at := max(t, lo.inv)
			op := lo.op
			ns := s
			expAt := min(s.e, s.r)
			switch op.kind {
			case "acquire":
				if lo.outcome == "fail" {
					break
				}
				if s.holder != "" && s.holder != op.client {
					at = max(at, expAt)
				}
				if fenced && lo.outcome == "ok" && op.token > 0 && op.token <= s.tok {
					continue
				}
				ns.holder, ns.e = op.client, never
				if lease > 0 {
					ns.e = lo.inv + lease
				}
				if rd.lenientR {
					ns.r = x.rLenient(lo)
				} else {
					ns.r = x.rStrict(lo)
				}
				if lo.outcome == "ok" && op.token > s.tok {
					ns.tok = op.token
				}
			case "release", "extend":
				switch lo.outcome {
				case "ok", "unknown": // an unknown one placed takes its ok effect
					if s.holder != op.client {
						continue
					}
					if op.kind == "release" {
						ns.holder = ""
					} else if lease > 0 {
						ns.e = lo.inv + lease
					}
				case "fail":
					if s.holder == op.client {
						at = max(at, expAt)
						ns.holder = ""
					} else if rd.literalFail {
						ns.holder = ""
					}
				}
			}
			if at > lo.comp {
				continue
			}
			placed[i] = true
			if dfs(done+1, at, ns) {
				placed[i] = false
				return true
			}
			placed[i] = false
		}
		return false
	}
	return dfs(0, 0, st{e: never, r: never})
}

func tinyCase(rng *rand.Rand, seed uint64) *caseConfig {
	g := &gen{rng}
	c := &caseConfig{seed: seed, name: "tiny", keys: 1, servers: 1, instances: 2 + g.n(2), clientsPer: 1}
	c.variant = Variants[g.n(len(Variants))]
	c.backend = "tiny"
	c.fenced = g.p(0.7) || c.variant == TokenReset
	c.lease = g.ms(20, 80)
	if g.p(0.15) && c.variant != LateLost {
		c.lease = 0
		c.freeOnDeath = true
	}
	c.duration = g.ms(120, 260)
	if g.p(0.4) {
		// a grid of ticks: operations whose instants tie (MODEL §2, §8:
		// they may take effect in either order)
		c.tick = []int64{1e6, 2e6}[g.n(2)]
	}
	c.opTimeout = g.ms(8, 30)
	c.acquireTimeout = g.ms(30, 90)
	c.holdMin, c.holdMax = g.ms(2, 10), g.ms(12, 50)
	c.thinkMin, c.thinkMax = g.ms(1, 5), g.ms(6, 30)
	c.retryBase, c.retryMax = g.ms(1, 3), g.ms(5, 15)
	c.longHoldP = 0.2
	c.validityTimer = g.p(0.5)
	c.extendEvery = 0
	if g.p(0.3) && c.lease > 0 {
		c.extendEvery = c.lease / 3
	}
	c.notify = g.p(0.5)
	c.misP = 0.5
	c.cleanupAfterLostP = 0.5
	if c.variant == ReleaseOther {
		c.wrongTokenP = 0.3
	}
	if g.p(0.5) {
		p := &faultPlan{outcome: foNormal, kind: fkPauseInst, insts: []int{1}, spec: FaultSpec{Name: "pause-1", Type: "pause", Target: "instance-1", At: g.ms(20, 100), For: g.ms(20, 120)}}
		c.faults = append(c.faults, p)
	} else if g.p(0.5) {
		p := &faultPlan{outcome: foNormal, kind: fkPartition, links: []linkTarget{{"srv-1", 1}}, spec: FaultSpec{Name: "partition-1", Type: "partition", Target: "link:srv-1@instance-1", At: g.ms(20, 100), For: g.ms(20, 80)}}
		c.faults = append(c.faults, p)
	}
	if g.p(0.3) {
		c.dyingMax = g.ms(1, 5)
		c.faults = append(c.faults, &faultPlan{outcome: foNormal, kind: fkKillInst, insts: []int{2}, spec: FaultSpec{Name: "kill-2", Type: "kill", Target: "instance-2", At: g.ms(40, 110)}})
	}
	return c
}

func TestBruteForceLinearizability(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	var searched, proofs, fproofs, witnesses int
	limit := 1500
	if testing.Short() {
		limit = 300
	}
	for i := 0; i < 6000 && searched < limit; i++ {
		c := tinyCase(rng, rng.Uint64())
		r := &Run{lastT: -1, blank: map[int]int{}}
		cr := r.simulateCase(c, 1e9)
		r.Cases = []*caseRec{cr}
		x := &evalCtx{cr: cr, ev: r.Events, cut: len(r.Events)}
		m := x.linOps()
		var los []*linOp
		for _, op := range cr.ops {
			if lo := m[op]; lo != nil {
				los = append(los, lo)
			}
		}
		if len(los) > 9 || len(los) < 2 {
			continue
		}
		sort.Slice(los, func(i, j int) bool { return los[i].inv < los[j].inv })
		searched++
		wp, wf, _ := x.witness(m)
		pp, pf := x.proofs(m)
		mine := reading{}
		if wp && !x.brute(los, mine, false) {
			t.Errorf("tiny case %d (%s): the witness says ok, the search finds no order\n%s", i, c.variant, dumpOps(los))
		}
		if wp && wf && x.cr.meta.Fenced && !x.brute(los, mine, true) {
			t.Errorf("tiny case %d (%s): the fenced witness says ok, the search finds no order\n%s", i, c.variant, dumpOps(los))
		}
		if wp {
			witnesses++
		}
		for _, rd := range []reading{{false, false}, {true, false}, {false, true}, {true, true}} {
			if pp != "" && x.brute(los, rd, false) {
				t.Errorf("tiny case %d (%s): proof %q, but reading %+v has an order\n%s", i, c.variant, pp, rd, dumpOps(los))
			}
			if pf != "" && x.brute(los, rd, true) {
				t.Errorf("tiny case %d (%s): fenced proof %q, but reading %+v has an order\n%s", i, c.variant, pf, rd, dumpOps(los))
			}
		}
		if pp != "" {
			proofs++
		}
		if pf != "" {
			fproofs++
		}
	}
	t.Logf("%d tiny histories searched: %d witnesses, %d proofs, %d fenced proofs", searched, witnesses, proofs, fproofs)
	if proofs == 0 || witnesses == 0 {
		t.Errorf("the tiny histories exercise too little")
	}
}

func dumpOps(los []*linOp) string {
	s := ""
	for _, lo := range los {
		s += fmt.Sprintf("  %s %s %s [%d, %d] %s token %d\n", lo.op.client, lo.op.kind, lo.op.key, lo.inv, lo.comp, lo.outcome, lo.op.token)
	}
	return s
}
