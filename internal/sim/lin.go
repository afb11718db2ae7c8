package sim

import (
	"fmt"
	"sort"
)

// Linearizability (MODEL §8), worked out two ways, neither of them a search:
//
//   - a witness: the service's own log says at which instant it applied
//     each request. If that order satisfies every rule of §8 (with the
//     strictest reading of each rule), a linearization exists: "ok".
//   - a proof: a pattern of the history that no order can satisfy under any
//     reading of §8 (two grants, the first's lease unexpirable until the
//     second completed, nothing in between that could free the key):
//     "violation".
//
// Anything else is "any": the test does not compare it.

type linOp struct {
	op      *opRec
	inv     int64
	comp    int64 // never: unknown outcome
	outcome string
	// invIdx, compIdx: the events' positions in the file (compIdx never32
	// for an unknown outcome): with equal timestamps, file order says
	// which came first (MODEL §2, §8)
	invIdx, compIdx int
}

func (x *evalCtx) linOps() map[*opRec]*linOp {
	m := map[*opRec]*linOp{}
	for _, op := range x.cr.ops {
		if !x.visible(op) {
			continue
		}
		switch op.kind {
		case "acquire", "release", "extend":
		default:
			continue
		}
		if x.outcome(op) == "unsent" {
			continue // never reached the service: not in its history (MODEL §8)
		}
		lo := &linOp{op: op, inv: x.T(op.invIdx), comp: never, outcome: x.outcome(op), invIdx: op.invIdx, compIdx: never32}
		if lo.outcome != "unknown" {
			lo.comp, lo.compIdx = x.T(op.compIdx), op.compIdx
		}
		m[op] = lo
	}
	return m
}

// expiry0: E(g) of a grant by op, before any extension.
func (x *evalCtx) expiry0(lo *linOp) int64 {
	if x.cr.meta.LeaseNs == 0 {
		return never
	}
	return lo.inv + x.cr.meta.LeaseNs
}

func (x *evalCtx) deathT(inst int) int64 {
	if ir := x.cr.inst(inst); ir != nil && x.in(ir.deathIdx) {
		return x.T(ir.deathIdx)
	}
	return never
}

// lostAfter: the lost notifications of op's client for op's key after op's
// completion, as event indices.
func (x *evalCtx) lostAfter(op *opRec) []int {
	var ls []int
	for _, l := range x.cr.losts {
		if l.client == op.client && l.key == op.key && !l.post && x.in(l.idx) && l.idx > op.compIdx {
			ls = append(ls, l.idx)
		}
	}
	return ls
}

// rStrict: R(g) read strictly (the latest it can be): a lost counts only
// when it ended the hold or came before a recorded completion of the
// hold's release; death only when the hold ended by it.
func (x *evalCtx) rStrict(lo *linOp) int64 {
	op := lo.op
	if lo.outcome == "unknown" {
		return x.deathT(op.inst)
	}
	h := op.hold
	if h == nil {
		return never
	}
	for _, l := range x.lostAfter(op) {
		if h.endKind == "lost" && h.endIdx == l && x.in(h.endIdx) {
			return lo.comp
		}
		if h.rel != nil && x.visible(h.rel) && x.outcome(h.rel) != "unknown" && x.T(h.rel.compIdx) > x.T(l) {
			return lo.comp
		}
	}
	if h.endKind == "death" && x.in(h.endIdx) {
		return x.T(h.endIdx)
	}
	return never
}

// rLenient: R(g) read leniently (the earliest it can be).
func (x *evalCtx) rLenient(lo *linOp) int64 {
	op := lo.op
	if lo.outcome != "unknown" && op.hold != nil {
		h := op.hold
		for _, l := range x.lostAfter(op) {
			if h.rel == nil || !x.visible(h.rel) || x.outcome(h.rel) == "unknown" || x.T(h.rel.compIdx) >= x.T(l) {
				return lo.comp
			}
		}
	}
	return x.deathT(op.inst)
}

type linState struct {
	holder string
	e, r   int64
}

func (s *linState) expirable(t int64) bool { return s.holder != "" && t >= min(s.e, s.r) }

// witness checks the service's own order against §8. It returns whether
// the plain model and the fenced model accept it, and why not.
func (x *evalCtx) witness(los map[*opRec]*linOp) (plain, fenced bool, why string) {
	lease := x.cr.meta.LeaseNs
	st := map[string]*linState{}
	maxTok := map[string]uint64{}
	used := map[*opRec]bool{}
	fenced = true
	get := func(k string) *linState {
		if st[k] == nil {
			st[k] = &linState{}
		}
		return st[k]
	}
	var unkRel []*linOp
	for _, op := range x.cr.ops {
		if lo := los[op]; lo != nil && op.kind == "release" && lo.outcome == "unknown" {
			unkRel = append(unkRel, lo)
		}
	}
	// fire: an unknown release of the holder may take effect now.
	fire := func(k string, t int64) bool {
		s := get(k)
		for _, lo := range unkRel {
			if lo.op.kind == "release" && lo.outcome == "unknown" && lo.op.key == k && lo.op.client == s.holder && lo.inv <= t && !used[lo.op] {
				used[lo.op] = true
				s.holder = ""
				x.noteLate(lo, t)
				return true
			}
		}
		return false
	}
	for _, a := range x.cr.applied {
		lo := los[a.op]
		if lo == nil {
			continue // not in the model: posthumous, or after the history's end
		}
		op := lo.op
		if a.x < lo.inv || (lo.outcome != "unknown" && a.x > lo.comp && (op.kind != "acquire" || a.attempt == op.okAttempt)) {
			return false, false, fmt.Sprintf("witness: %s of %s applied at %d outside [%d, %d]", op.kind, op.client, a.x, lo.inv, lo.comp)
		}
		s := get(op.key)
		c := op.client
		switch op.kind {
		case "acquire":
			if lo.outcome == "fail" || a.result != "granted" || (lo.outcome == "ok" && a.attempt != op.okAttempt) || used[op] {
				continue
			}
			can := func() bool { return s.holder == "" || s.holder == c || s.expirable(a.x) }
			if !can() && fire(op.key, a.x) {
				// freed by an unknown release
			}
			if !can() {
				if lo.outcome == "unknown" {
					continue
				}
				return false, false, fmt.Sprintf("witness: acquire of %s by %s at %d while %s held it", op.key, c, a.x, s.holder)
			}
			if lo.outcome == "ok" && op.token > 0 {
				if op.token <= maxTok[op.key] && fenced {
					fenced = false
					why = fmt.Sprintf("witness: token %d of %s on %s not above %d", op.token, c, op.key, maxTok[op.key])
				}
				maxTok[op.key] = max(maxTok[op.key], op.token)
			}
			used[op] = true
			s.holder, s.e, s.r = c, x.expiry0(lo), x.rStrict(lo)
		case "release", "extend":
			switch lo.outcome {
			case "ok":
				if s.holder != c {
					return false, false, fmt.Sprintf("witness: %s ok by %s at %d while %q held %s", op.kind, c, a.x, s.holder, op.key)
				}
				if op.kind == "release" {
					s.holder = ""
				} else if lease > 0 {
					s.e = lo.inv + lease
				}
			case "fail":
				if s.holder == c && !s.expirable(a.x) {
					fire(op.key, a.x)
				}
				if s.holder == c && !s.expirable(a.x) {
					return false, false, fmt.Sprintf("witness: %s of %s refused at %d while its grant on %s was in force", op.kind, c, a.x, op.key)
				}
				if s.holder == c {
					s.holder = ""
				}
			case "unknown":
				if used[op] || s.holder != c {
					continue
				}
				if op.kind == "release" && a.result == "released" {
					used[op] = true
					s.holder = ""
					x.noteLate(lo, a.x)
				}
				if op.kind == "extend" && a.result == "extended" && lease > 0 {
					used[op] = true
					s.e = lo.inv + lease
				}
			}
		}
	}
	return true, fenced, why
}

// noteLate notes an unknown operation the witness lets take effect after
// its client invoked a later operation: §8 allows it (an unknown outcome's
// interval never closes), a search that closes it at the client's next
// operation would not.
func (x *evalCtx) noteLate(lo *linOp, at int64) {
	next := int64(never)
	for _, op := range x.cr.ops {
		if op.client == lo.op.client && op.invIdx > lo.op.invIdx && x.visible(op) {
			next = min(next, x.T(op.invIdx))
		}
	}
	if at > next {
		x.linNotes = append(x.linNotes, fmt.Sprintf("late unknown: the witness lets the unknown %s of %s on %s invoked at %d take effect at %d, after its client's next operation (invoked at %d)",
			lo.op.kind, lo.op.client, lo.op.key, lo.inv, at, next))
	}
}

// proofs looks for histories no order can satisfy.
func (x *evalCtx) proofs(los map[*opRec]*linOp) (plain, fenced string) {
	lease := x.cr.meta.LeaseNs
	byKey := map[string][]*linOp{}
	var keys []string
	for _, op := range x.cr.ops { // in invoke order: deterministic
		if lo := los[op]; lo != nil {
			if byKey[op.key] == nil {
				keys = append(keys, op.key)
			}
			byKey[op.key] = append(byKey[op.key], lo)
		}
	}
	for _, k := range keys {
		all := byKey[k]
		var oks, freeing []*linOp
		unk := map[string][]*linOp{}
		for _, lo := range all {
			op := lo.op
			if op.kind == "acquire" && lo.outcome == "ok" {
				oks = append(oks, lo)
			}
			if op.kind == "release" || (op.kind == "extend" && lo.outcome != "ok") {
				freeing = append(freeing, lo)
			}
			if (op.kind == "acquire" || op.kind == "extend") && lo.outcome == "unknown" {
				unk[op.client] = append(unk[op.client], lo)
			}
		}
		// eEff: the earliest E(g) may be when an operation completes at
		// event `until`: an unknown acquire or extension invoked before,
		// or at the same instant (a tie goes either way, §2), may have
		// taken effect
		eEff := func(g *linOp, until int) int64 {
			if lease == 0 {
				return never
			}
			t := g.inv
			for _, u := range unk[g.op.client] {
				if u.inv <= x.T(until) {
					t = min(t, u.inv)
				}
			}
			return t + lease
		}
		// the freeing operations that may take effect after an operation
		// invoked at event lo (only those that completed strictly before
		// it was invoked may not, §8), the two invoked first: enough to
		// tell whether any but one was invoked before a given event
		firstFree := func(lo int) (a, b *linOp) {
			for _, f := range freeing {
				if f.comp < x.T(lo) {
					continue
				}
				switch {
				case a == nil || f.invIdx < a.invIdx:
					a, b = f, a
				case b == nil || f.invIdx < b.invIdx:
					b = f
				}
			}
			return a, b
		}
		// the fenced rule: a token not above one granted strictly before
		// (completed strictly before the other was invoked: a tie of
		// instants may go either way, §8)
		byComp := append([]*linOp(nil), oks...)
		sort.Slice(byComp, func(i, j int) bool { return byComp[i].compIdx < byComp[j].compIdx })
		prefMax := make([]*linOp, len(byComp))
		for i, g := range byComp {
			prefMax[i] = g
			if i > 0 && prefMax[i-1].op.token >= g.op.token {
				prefMax[i] = prefMax[i-1]
			}
		}
		for _, g2 := range oks {
			n := sort.Search(len(byComp), func(i int) bool { return byComp[i].comp >= g2.inv })
			if fenced == "" && n > 0 && g2.op.token > 0 && prefMax[n-1].op.token >= g2.op.token {
				g1 := prefMax[n-1]
				fenced = fmt.Sprintf("%s: token %d of %s (completed %d) then token %d of %s (invoked %d)", k, g1.op.token, g1.op.client, g1.comp, g2.op.token, g2.op.client, g2.inv)
			}
		}
		for _, g1 := range oks {
			if g1.op.dup || plain != "" {
				continue
			}
			fa, fb := firstFree(g1.invIdx)
			// blocked: a freeing operation invoked before the completion
			// at event hi, or at its instant, may take effect before it
			blocked := func(hi int, except *linOp) bool {
				f := fa
				if f != nil && f == except {
					f = fb
				}
				return f != nil && f.inv <= x.T(hi)
			}
			// regrant: a grant anew to g1's client invoked before event
			// hi (re-entrant, or after a release never sent) may replace
			// g1's grant, and with it what may take it back (its R)
			regrant := func(hi int) bool {
				for _, o := range all {
					if o.op != g1.op && o.op.kind == "acquire" && o.op.client == g1.op.client && o.comp >= g1.inv && o.inv <= x.T(hi) {
						return true
					}
				}
				return false
			}
			r1 := x.rLenient(g1)
			for _, g2 := range oks {
				if g2.op.client != g1.op.client && g1.comp < g2.inv && g2.comp < min(eEff(g1, g2.compIdx), r1) && !blocked(g2.compIdx, nil) && !regrant(g2.compIdx) {
					plain = fmt.Sprintf("%s: granted to %s [%d,%d] and to %s [%d,%d] with nothing between to free it", k, g1.op.client, g1.inv, g1.comp, g2.op.client, g2.inv, g2.comp)
					break
				}
			}
			for _, r := range all {
				if plain != "" {
					break
				}
				op := r.op
				other := op.kind == "release" && r.outcome == "ok" && op.client != g1.op.client
				own := op.client == g1.op.client && r.outcome == "fail" && (op.kind == "release" || op.kind == "extend")
				if (other || own) && g1.comp < r.inv && r.comp < min(eEff(g1, r.compIdx), r1) && !blocked(r.compIdx, r) && !regrant(r.compIdx) {
					plain = fmt.Sprintf("%s: %s of %s [%d,%d] %s while the grant of %s [%d,%d] was in force", k, op.kind, op.client, r.inv, r.comp, r.outcome, g1.op.client, g1.inv, g1.comp)
				}
			}
		}
	}
	return plain, fenced
}

// linTruth gives the linearizability verdicts' truth (before §12).
func (x *evalCtx) linTruth() (plain, fenced string, notes []string) {
	los := x.linOps()
	wp, wf, why := x.witness(los)
	pp, pf := x.proofs(los)
	if why != "" {
		notes = append(notes, why)
	}
	if wp {
		notes = append(notes, x.linNotes...)
	}
	switch {
	case wp && pp != "":
		notes = append(notes, "CONTRADICTION: witness and proof: "+pp)
		plain = "any"
	case wp:
		plain = "ok"
	case pp != "":
		plain = "violation"
		notes = append(notes, "proof: "+pp)
	default:
		plain = "any"
	}
	switch {
	case !x.cr.meta.Fenced:
		fenced = "any"
	case plain == "violation":
		fenced = "violation"
	case wp && wf && pf != "":
		notes = append(notes, "CONTRADICTION: fenced witness and proof: "+pf)
		fenced = "any"
	case wp && wf:
		fenced = "ok"
	case pf != "":
		fenced = "violation"
		notes = append(notes, "fenced proof: "+pf)
	default:
		fenced = "any"
	}
	return plain, fenced, notes
}
