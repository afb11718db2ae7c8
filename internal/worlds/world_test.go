package worlds

import (
	"encoding/json"
	"slices"
	"sort"
	"strings"

	"github.com/lockbench/lockbench/history"
	"github.com/lockbench/lockbench/internal/threshold"
)

// Instants of a world are symbolic: 4·tick, and 4·tick ± 1 for "just
// before" and "just after" a tick. A world whose figures depend on an
// instant strictly inside an open interval is one of a family whose
// figures tend to the interval's end: the oracle reads the family at its
// limit (the closure of the set of worlds), which is what "the least over
// the worlds" means for a duration (A7).
const (
	inf  = int64(1) << 60
	none = int64(-1) << 60 // an operation that never took effect
)

func sym(t int) int64 { return int64(t) * 4 }

// num is a symbolic instant's value in ticks, in the limit.
func num(v int64) int64 {
	if v >= inf {
		return inf
	}
	return (v + 2) >> 2
}

// rop is one operation of the record (A1).
type rop struct {
	client    int
	f, key    string
	inv, comp int          // ticks; comp -1: no completion
	out       history.Type // ok, fail, info, unsent; "" in flight
	token     uint64
	choices   []int64 // the instants it may have taken effect at (none: never)
	idx       int     // its index among the case's operations
	keyIdx    int
	lostAfter bool // a lost signal of its client and key came while it was in flight
}

// belief is one client's belief that it holds a key (A2): [b, e).
type belief struct {
	client, keyIdx int
	b, e           int64
	acq            int // the acquire whose ok began it
}

// rcase is what the oracle reads of one case's record.
type rcase struct {
	meta     history.CaseMeta
	lease    int64 // symbolic
	ops      []*rop
	beliefs  []belief
	bad      int
	acqOK    int
	regress  int
	ended    bool
	ticks    []int
	nclients int
	unknownX bool // an extension whose outcome is unknown
	// unknownRenewal: an acquire whose outcome is unknown, by a client
	// that believes it holds the key later: it may land as a renewal.
	unknownRenewal bool
	wide           bool // an answered operation whose window is more than one instant
}

// read reads a case's events into operations and beliefs. It takes the
// record as it is: each completion closes its client's operation in
// flight (the generator writes no other).
func read(events []history.Event) *rcase {
	rc := &rcase{}
	json.Unmarshal(events[0].Meta, &rc.meta)
	rc.lease = sym(int(rc.meta.LeaseNs / tick))
	clients := map[string]int{}
	keys := map[string]int{}
	cur := map[int]*rop{}
	believes := map[[2]int]int{} // client, key -> belief index
	maxTok := map[int]uint64{}
	tickSet := map[int]bool{}
	endBelief := func(c, k int, at int64) {
		if i, ok := believes[[2]int{c, k}]; ok {
			rc.beliefs[i].e = at
			delete(believes, [2]int{c, k})
		}
	}
	for _, e := range events {
		t := int(e.T / tick)
		tickSet[t] = true
		if e.Type == history.Mark {
			switch e.F {
			case history.MarkHarness:
				var s history.HarnessStats
				json.Unmarshal(e.Meta, &s)
				rc.bad = s.BadLines
			case history.MarkCaseEnd:
				rc.ended = true
				for ck := range believes {
					endBelief(ck[0], ck[1], sym(t))
				}
			}
			continue
		}
		c, ok := clients[e.Proc]
		if !ok {
			c = len(clients)
			clients[e.Proc] = c
		}
		k, ok := keys[e.Key]
		if !ok {
			k = len(keys)
			keys[e.Key] = k
		}
		switch {
		case e.F == history.OpLost:
			endBelief(c, k, sym(t))
			if o := cur[c]; o != nil && o.keyIdx == k {
				o.lostAfter = true
			}
		case e.Type == history.Invoke:
			o := &rop{client: c, f: e.F, key: e.Key, keyIdx: k, inv: t, comp: -1, idx: len(rc.ops)}
			rc.ops = append(rc.ops, o)
			cur[c] = o
			if e.F == history.OpRelease {
				endBelief(c, k, sym(t))
			}
		default:
			o := cur[c]
			delete(cur, c)
			o.comp, o.out, o.token = t, e.Type, e.Token
			if o.f == history.OpAcquire && e.Type == history.OK {
				rc.acqOK++
				if e.Token > 0 {
					if e.Token <= maxTok[k] {
						rc.regress++
					} else {
						maxTok[k] = e.Token
					}
				}
				if _, held := believes[[2]int{c, k}]; !held {
					believes[[2]int{c, k}] = len(rc.beliefs)
					rc.beliefs = append(rc.beliefs, belief{client: c, keyIdx: k, b: sym(t), e: inf, acq: o.idx})
				}
			}
		}
	}
	rc.nclients = len(clients)
	for t := range tickSet {
		rc.ticks = append(rc.ticks, t)
	}
	sort.Ints(rc.ticks)
	for _, o := range rc.ops {
		unknown := o.out == history.Info || o.out == ""
		if !unknown && o.comp > o.inv {
			rc.wide = true
		}
		if o.f == history.OpExtend && unknown {
			rc.unknownX = true
		}
		if o.f == history.OpAcquire && unknown {
			for _, b := range rc.beliefs {
				if b.client == o.client && b.keyIdx == o.keyIdx && b.e > sym(o.inv) {
					rc.unknownRenewal = true
				}
			}
		}
	}
	return rc
}

// critical are the instants at which a world's figures or legality can
// change: the record's ticks, the same less a lease (an effect there
// expires at a tick), and just before and after each.
func (rc *rcase) critical() []int64 {
	var out []int64
	for _, t := range rc.ticks {
		for _, p := range []int64{sym(t), sym(t) - rc.lease} {
			if rc.lease == 0 && p != sym(t) {
				continue
			}
			out = append(out, p-1, p, p+1)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// choose gives each operation the instants at which it may have taken
// effect (A1): an ok one inside its window; a refused release or
// extension answered at one instant of its window; an unknown one at any
// instant from its invoke on, or never; a refused acquire and an unsent
// operation never.
func (rc *rcase) choose() {
	crit := rc.critical()
	last := sym(rc.ticks[len(rc.ticks)-1])
	in := func(lo, hi int64) []int64 {
		var out []int64
		for _, p := range crit {
			if p >= lo && p <= hi {
				out = append(out, p)
			}
		}
		return out
	}
	for _, o := range rc.ops {
		switch {
		case o.out == history.OK:
			o.choices = in(sym(o.inv), sym(o.comp))
		case o.out == history.Fail && o.f != history.OpAcquire:
			o.choices = in(sym(o.inv), sym(o.comp))
		case o.out == history.Fail, o.out == unsentType:
			o.choices = []int64{none}
		default: // info, or in flight: unknown
			o.choices = append([]int64{none}, in(sym(o.inv), last)...)
		}
	}
}

// lostAlt is one thing a lost line may have been (A4): nothing that
// changes a belief (alt.belief -1), or a lost signal that ended a belief
// at an instant.
type lostAlt struct {
	belief int
	at     int64
}

func (rc *rcase) lostAlts() []lostAlt {
	alts := []lostAlt{{belief: -1}}
	if rc.bad == 0 {
		return []lostAlt{{belief: -1}}
	}
	for i, b := range rc.beliefs {
		for _, t := range rc.ticks {
			if p := sym(t); p >= b.b && p < b.e {
				alts = append(alts, lostAlt{belief: i, at: p})
			}
		}
	}
	return alts
}

// worldCount is how many worlds the choices make.
func (rc *rcase) worldCount() int {
	n := 1
	for _, o := range rc.ops {
		n *= len(o.choices)
		if n > 1<<30 {
			return n
		}
	}
	return n * len(rc.lostAlts())
}

// grant is one grant of a key by the service in a world.
type grant struct {
	holder int
	exp    int64 // when its lease runs out (inf: no lease)
	end    int64 // when the service took it back
}

// figs are one world's figures.
type figs struct {
	violations int
	overlapMax int64
	zombies    int
	zombieMax  int64
}

// truth is what the worlds say of a case.
type truth struct {
	worlds  int // worlds enumerated (choices × orders)
	allowed int
	fenced  bool // some allowed world has tokens strictly increasing
	min     figs
	max     figs
	// thresholds: for each, whether it holds in every allowed world and in
	// some.
	thrAll, thrAny []bool
	thr            []threshold.Threshold
}

// world is the working state of one world's service.
type world struct {
	rc      *rcase
	at      []int64 // chosen instant per op
	order   []int   // ops that took effect, by instant
	grants  []grant
	cur     []int // per key: the grant in force (-1: free)
	opGrant []int
	last    []int // per client: its last answered operation played
	// clientOrder: a client's answered operations take effect in its own
	// order, even when an answer and the next invoke share an instant.
	clientOrder bool
}

// run plays the service through the operations in w.order under lease-lock
// semantics and reports whether the record's answers are possible, and
// whether tokens rose strictly (the fenced service).
func (w *world) run() (ok, fencedOK bool) {
	rc := w.rc
	w.grants = w.grants[:0]
	for k := range w.cur {
		w.cur[k] = -1
	}
	fencedOK = true
	var maxTok [2]uint64
	for c := range w.last {
		w.last[c] = -1
	}
	for _, i := range w.order {
		o := rc.ops[i]
		x := w.at[i]
		k := o.keyIdx
		if w.clientOrder && (o.out == history.OK || o.out == history.Fail) {
			// A client's own answered operations keep its order: it
			// invoked the next one after the answer to the last.
			if w.last[o.client] > i {
				return false, false
			}
			w.last[o.client] = i
		}
		g := w.cur[k]
		if g >= 0 && w.grants[g].exp < x {
			w.grants[g].end = w.grants[g].exp
			w.cur[k], g = -1, -1
		}
		mine := g >= 0 && w.grants[g].holder == o.client
		// A lease that runs out at x and an operation at x stand in
		// either order (A3): the grant is then both still held and gone.
		tie := g >= 0 && w.grants[g].exp == x
		applied := o.out != history.Fail
		switch o.f {
		case history.OpAcquire:
			if g >= 0 && !mine {
				if !tie {
					return false, false
				}
				w.grants[g].end = x
				w.cur[k], g = -1, -1
			}
			exp := inf
			if rc.lease > 0 {
				exp = x + rc.lease
			}
			if mine {
				w.grants[g].exp = exp
			} else {
				w.grants = append(w.grants, grant{holder: o.client, exp: exp, end: inf})
				g = len(w.grants) - 1
				w.cur[k] = g
			}
			w.opGrant[i] = g
			if o.out == history.OK && rc.meta.Fenced {
				if o.token == 0 || o.token <= maxTok[k] {
					fencedOK = false
				}
				maxTok[k] = max(maxTok[k], o.token)
			}
		case history.OpRelease, history.OpExtend:
			if !applied { // refused: the grant was not the caller's then
				switch {
				case mine && tie:
					w.grants[g].end = x
					w.cur[k] = -1
				case mine:
					return false, false
				}
				continue
			}
			if !mine {
				return false, false
			}
			if o.f == history.OpRelease {
				w.grants[g].end = x
				w.cur[k] = -1
			} else if rc.lease > 0 {
				w.grants[g].exp = x + rc.lease
			}
		}
	}
	for _, g := range w.cur {
		if g >= 0 {
			w.grants[g].end = w.grants[g].exp
		}
	}
	return true, fencedOK
}

// beliefFigures are the overlaps of the beliefs (A2), a lost line read as
// alt: they need no world of the service.
func (rc *rcase) beliefFigures(alt lostAlt) figs {
	var f figs
	for i := range rc.beliefs {
		bi := rc.beliefs[i]
		ei := rc.end(i, alt)
		for j := i + 1; j < len(rc.beliefs); j++ {
			bj := rc.beliefs[j]
			if bj.keyIdx != bi.keyIdx || bj.client == bi.client {
				continue
			}
			if d := num(min(ei, rc.end(j, alt))) - num(max(bi.b, bj.b)); d > 0 {
				f.violations++
				f.overlapMax = max(f.overlapMax, d)
			}
		}
	}
	return f
}

// end is when belief i ended, a lost line read as alt.
func (rc *rcase) end(i int, alt lostAlt) int64 {
	if alt.belief == i {
		return alt.at
	}
	return rc.beliefs[i].e
}

// zombieFigures are a world's zombies: each belief's time past the
// instant the service took its grant back.
func (w *world) zombieFigures(alt lostAlt) figs {
	rc := w.rc
	var f figs
	for i, b := range rc.beliefs {
		if g := w.opGrant[b.acq]; g >= 0 {
			if z := num(rc.end(i, alt)) - num(max(b.b, w.grants[g].end)); z > 0 {
				f.zombies++
				f.zombieMax = max(f.zombieMax, z)
			}
		}
	}
	return f
}

// value is a threshold's figure in a world, in the threshold's base unit.
func (f figs) value(metric string) float64 {
	switch metric {
	case "violations":
		return float64(f.violations)
	case "overlap_max":
		return float64(f.overlapMax)
	case "zombies":
		return float64(f.zombies)
	case "zombie_max":
		return float64(f.zombieMax)
	}
	return -1
}

// enumerate walks every world of rc: every choice of instants, every
// order of effects at one instant (A3), every reading of the lost lines.
func enumerate(rc *rcase) *truth { return enumerateOrder(rc, true) }

// enumerateOrder is enumerate, with or without a client's own order at
// one instant (A3 read as the merger's order only, or as every order).
func enumerateOrder(rc *rcase, clientOrder bool) *truth {
	tr := &truth{}
	for _, src := range rc.meta.Thresholds {
		t, _ := threshold.Parse(src)
		tr.thr = append(tr.thr, t)
	}
	tr.thrAll = make([]bool, len(tr.thr))
	tr.thrAny = make([]bool, len(tr.thr))
	for i := range tr.thrAll {
		tr.thrAll[i] = true
	}
	alts := rc.lostAlts()
	w := &world{rc: rc, at: make([]int64, len(rc.ops)), cur: make([]int, 2), opGrant: make([]int, len(rc.ops)), last: make([]int, rc.nclients), clientOrder: clientOrder}
	idx := make([]int, len(rc.ops))
	judge := func(i int, v float64) {
		holds := tr.thr[i].Judge(v).Pass
		tr.thrAll[i] = tr.thrAll[i] && holds
		tr.thrAny[i] = tr.thrAny[i] || holds
	}
	zombieMetric := func(m string) bool { return strings.HasPrefix(m, "zombie") }
	// The beliefs' overlaps, over the readings of the lost lines.
	for n, a := range alts {
		f := rc.beliefFigures(a)
		if n == 0 {
			tr.min.violations, tr.max.violations, tr.min.overlapMax, tr.max.overlapMax = f.violations, f.violations, f.overlapMax, f.overlapMax
		}
		tr.min.violations = min(tr.min.violations, f.violations)
		tr.max.violations = max(tr.max.violations, f.violations)
		tr.min.overlapMax = min(tr.min.overlapMax, f.overlapMax)
		tr.max.overlapMax = max(tr.max.overlapMax, f.overlapMax)
		for i, t := range tr.thr {
			if !zombieMetric(t.Metric) {
				judge(i, f.value(t.Metric))
			}
		}
	}
	first := true
	record := func(fencedOK bool) {
		tr.allowed++
		tr.fenced = tr.fenced || fencedOK
		for _, a := range alts {
			f := w.zombieFigures(a)
			if first {
				tr.min.zombies, tr.max.zombies, tr.min.zombieMax, tr.max.zombieMax, first = f.zombies, f.zombies, f.zombieMax, f.zombieMax, false
			}
			tr.min.zombies = min(tr.min.zombies, f.zombies)
			tr.max.zombies = max(tr.max.zombies, f.zombies)
			tr.min.zombieMax = min(tr.min.zombieMax, f.zombieMax)
			tr.max.zombieMax = max(tr.max.zombieMax, f.zombieMax)
			for i, t := range tr.thr {
				if zombieMetric(t.Metric) {
					judge(i, f.value(t.Metric))
				}
			}
		}
	}
	for {
		for i, o := range rc.ops {
			w.at[i] = o.choices[idx[i]]
			w.opGrant[i] = -1
		}
		w.order = w.order[:0]
		for i := range rc.ops {
			if w.at[i] != none {
				w.order = append(w.order, i)
			}
		}
		sort.SliceStable(w.order, func(a, b int) bool { return w.at[w.order[a]] < w.at[w.order[b]] })
		// Every order of the effects that share an instant (A3).
		permute(w.order, func(a, b int) bool { return w.at[a] == w.at[b] }, func() {
			tr.worlds++
			if ok, fencedOK := w.run(); ok {
				record(fencedOK)
			}
		})
		// next choice
		i := 0
		for ; i < len(idx); i++ {
			idx[i]++
			if idx[i] < len(rc.ops[i].choices) {
				break
			}
			idx[i] = 0
		}
		if i == len(idx) {
			break
		}
	}
	return tr
}

// permute calls fn for every order of s in which only runs of elements
// equal by same are reordered.
func permute(s []int, same func(a, b int) bool, fn func()) {
	var rec func(from int)
	rec = func(from int) {
		if from >= len(s) {
			fn()
			return
		}
		to := from + 1
		for to < len(s) && same(s[from], s[to]) {
			to++
		}
		if to-from == 1 {
			rec(to)
			return
		}
		heap(s[from:to], to-from, func() { rec(to) })
	}
	rec(0)
}

// heap is Heap's algorithm: every permutation of s[:n], fn after each.
func heap(s []int, n int, fn func()) {
	if n == 1 {
		fn()
		return
	}
	for i := 0; i < n-1; i++ {
		heap(s, n-1, fn)
		if n%2 == 0 {
			s[i], s[n-1] = s[n-1], s[i]
		} else {
			s[0], s[n-1] = s[n-1], s[0]
		}
	}
	heap(s, n-1, fn)
}
