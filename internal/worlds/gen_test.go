package worlds

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/lockbench/lockbench/history"
)

// tick is the generator's clock step: every event is dated on a whole
// millisecond, so that figures in ms are exact.
const tick = int64(time.Millisecond)

// unsentOn turns on the `unsent` outcome (A1: surely not applied, no claim)
// once the record language has it: off, the generator writes none, so this
// package builds against a decoder that refuses it.
var unsentOn = false

// unsentType is the completion type of an operation that was never sent.
const unsentType = history.Type("unsent")

// genCase is one generated case: its meta and its events, in file order,
// dated in ticks from the history's base.
type genCase struct {
	meta   history.CaseMeta
	events []history.Event
	// tags name what the generator put in (for the report's classes).
	tags []string
	// repeatOf is, for a copy of an earlier case (the same run twice, A5),
	// the index of that case; -1 otherwise.
	repeatOf int
}

// genHistory is one generated history: one or more cases.
type genHistory struct {
	seed  uint64
	cases []*genCase
}

// hidden is the generator's own service: one world the record will allow
// (or, for a record it corrupts on purpose, perhaps none).
type hiddenKey struct {
	holder string
	exp    int // tick from which the grant has run out (never: huge)
	token  uint64
}

type gOp struct {
	f, key   string
	inv      int
	comp     int          // -1: in flight at the end
	eff      int          // tick at which the service applies it; -1: never
	result   history.Type // what the service answered: ok or fail
	recorded history.Type // what the record says: ok, fail, info, "" (in flight)
	token    uint64
	done     bool
}

type gClient struct {
	proc      string
	op        *gOp
	next      int
	believes  string // key it believes it holds ("" none)
	holdUntil int
	seq       int
}

type stamped struct {
	t   int
	who string // proc, or "" for a mark
	seq int
	e   history.Event
}

const never = 1 << 40

// genOne generates one case starting at base (ticks).
func genOne(rng *rand.Rand, name string, base int) *genCase {
	nClients := 2 + rng.IntN(2)
	nKeys := 1
	if rng.IntN(5) == 0 {
		nKeys = 2
	}
	lease := 3 + rng.IntN(3)
	if rng.IntN(8) == 0 {
		lease = 0
	}
	D := 6 + rng.IntN(6)
	pUnknown := []float64{0, 0, 0.08, 0.15}[rng.IntN(4)]
	pWide := []int{0, 2, 4}[rng.IntN(3)] // in ten: operations whose window is not one instant
	gc := &genCase{repeatOf: -1}
	meta := history.CaseMeta{
		Name: name, Backend: "oracle", Duration: int64(D) * tick, Clients: nClients, Keys: nKeys,
		LeaseNs: int64(lease) * tick, OpTimeoutNs: 2 * tick,
	}
	if rng.IntN(4) == 0 {
		meta.Fenced = true
		gc.tags = append(gc.tags, "fenced")
	}
	if rng.IntN(12) == 0 {
		meta.Lockless = true
		gc.tags = append(gc.tags, "lockless")
	}
	if lease == 0 {
		gc.tags = append(gc.tags, "no-lease")
	}
	keys := []string{"k0", "k1"}[:nKeys]
	svc := map[string]*hiddenKey{}
	for _, k := range keys {
		svc[k] = &hiddenKey{exp: never}
	}
	var clients []*gClient
	for i := range nClients {
		clients = append(clients, &gClient{proc: fmt.Sprintf("i%dc0", i+1), next: 1 + rng.IntN(2)})
	}
	var out []stamped
	emit := func(c *gClient, t int, e history.Event) {
		e.T = int64(base+t) * tick
		e.Proc = c.proc
		c.seq++
		out = append(out, stamped{t: t, who: c.proc, seq: c.seq, e: e})
	}
	// apply runs op o on the service at tick t (MODEL-free: a lease lock).
	apply := func(c *gClient, o *gOp, t int) history.Type {
		k := svc[o.key]
		if k.holder != "" && k.exp <= t {
			k.holder = ""
		}
		held := k.holder == c.proc
		switch o.f {
		case history.OpAcquire:
			if k.holder != "" && !held {
				return history.Fail
			}
			k.holder, k.exp = c.proc, t+lease
			if lease == 0 {
				k.exp = never
			}
			if !held || o.token == 0 {
				k.token++
				if meta.Fenced && rng.IntN(25) == 0 && k.token > 1 {
					k.token -= 1 + uint64(rng.IntN(int(k.token-1)+1)) // a counter that went back
					gc.tags = append(gc.tags, "token-regressed")
				}
			}
			o.token = k.token
			return history.OK
		case history.OpRelease:
			if !held {
				return history.Fail
			}
			k.holder = ""
			return history.OK
		case history.OpExtend:
			if !held {
				return history.Fail
			}
			k.exp = t + lease
			if lease == 0 {
				k.exp = never
			}
			return history.OK
		}
		return history.Fail
	}
	var pending []struct {
		c *gClient
		o *gOp
	} // unknown operations that land late
	E := D + 1 + rng.IntN(3) // case-end
	for t := 1; t < E; t++ {
		order := slices.Clone(clients)
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		// Effects due now of operations already in flight, and late ones.
		for _, c := range order {
			if o := c.op; o != nil && o.eff == t && o.result == "" {
				o.result = apply(c, o, t)
			}
		}
		kept := pending[:0]
		for _, p := range pending {
			if p.o.eff == t {
				apply(p.c, p.o, t)
				gc.tags = append(gc.tags, "late-effect")
			} else {
				kept = append(kept, p)
			}
		}
		pending = kept
		for _, c := range order {
			// The library's lost signal, once the grant is really gone.
			if c.believes != "" && rng.IntN(3) == 0 {
				k := svc[c.believes]
				if k.holder != c.proc || k.exp <= t {
					emit(c, t, history.Event{Type: history.OK, F: history.OpLost, Key: c.believes})
					if c.op != nil {
						gc.tags = append(gc.tags, "lost-while-in-flight")
					}
					c.believes = ""
				}
			}
			if o := c.op; o != nil && o.comp == t {
				c.op = nil
				o.done = true
				rec := o.result
				switch {
				case rec == unsentType:
				case o.eff > t || o.eff < 0:
					rec = history.Info
				case rng.Float64() < pUnknown:
					rec = history.Info
				}
				o.recorded = rec
				e := history.Event{Type: rec, F: o.f, Key: o.key}
				if rec == history.OK && o.f == history.OpAcquire && meta.Fenced {
					e.Token = o.token
				}
				if rec == history.Info {
					e.Err = "timeout"
				}
				emit(c, t, e)
				if o.eff > t {
					pending = append(pending, struct {
						c *gClient
						o *gOp
					}{c, o})
				}
				switch {
				case o.f == history.OpAcquire && rec == history.OK:
					c.believes = o.key
					c.holdUntil = t + 1 + rng.IntN(lease+3)
					c.next = t + rng.IntN(2)
				default:
					c.next = t + rng.IntN(3)
				}
			}
			if c.op != nil || t < c.next {
				continue
			}
			var f, key string
			switch {
			case c.believes != "" && (t >= c.holdUntil || t >= D):
				f, key = history.OpRelease, c.believes
			case c.believes != "":
				if rng.IntN(3) != 0 {
					continue
				}
				f, key = history.OpExtend, c.believes
			case t >= D:
				continue
			default:
				f, key = history.OpAcquire, keys[rng.IntN(nKeys)]
			}
			w := 0
			if rng.IntN(10) < pWide {
				w = 1 + rng.IntN(2)
			}
			o := &gOp{f: f, key: key, inv: t, comp: t + w, eff: t + rng.IntN(w+1)}
			if rng.Float64() < pUnknown {
				// A timeout: the request may land inside its window, after
				// its client moved on, or never.
				o.comp = t + w + 1 + rng.IntN(2)
				switch rng.IntN(3) {
				case 0:
					o.eff = -1
				case 1:
					o.eff = o.comp + 1 + rng.IntN(2)
				}
			}
			if unsentOn && rng.IntN(15) == 0 {
				o.eff = -1 // never sent: its completion says so
				o.result = unsentType
			}
			c.op = o
			if f == history.OpRelease {
				c.believes = "" // A2: the release's invoke ends the belief
			}
			emit(c, t, history.Event{Type: history.Invoke, F: f, Key: key})
			if o.eff == t {
				o.result = apply(c, o, t)
			}
			if o.comp == t { // a zero-width window completes at once
				c.op = nil
				rec := o.result
				if rng.Float64() < pUnknown {
					rec = history.Info
				}
				e := history.Event{Type: rec, F: o.f, Key: o.key}
				if rec == history.OK && f == history.OpAcquire && meta.Fenced {
					e.Token = o.token
				}
				if rec == history.Info {
					e.Err = "timeout"
				}
				emit(c, t, e)
				switch {
				case f == history.OpAcquire && rec == history.OK:
					c.believes = key
					c.holdUntil = t + 1 + rng.IntN(lease+3)
					c.next = t + rng.IntN(2)
				default:
					c.next = t + rng.IntN(3)
				}
			}
		}
	}
	for _, c := range clients {
		if c.op != nil {
			gc.tags = append(gc.tags, "in-flight-at-end")
		}
	}
	// Now and then the record says the opposite of what the service
	// answered: a record no world explains (or one that rules some out).
	if rng.IntN(10) == 0 {
		var idx []int
		for i, s := range out {
			if (s.e.Type == history.OK || s.e.Type == history.Fail) && s.e.F != history.OpLost {
				idx = append(idx, i)
			}
		}
		if len(idx) > 0 {
			i := idx[rng.IntN(len(idx))]
			if out[i].e.Type == history.OK && out[i].e.F != history.OpAcquire {
				out[i].e.Type = history.Fail
				gc.tags = append(gc.tags, "flipped")
			} else if out[i].e.Type == history.Fail && out[i].e.F != history.OpAcquire {
				out[i].e.Type = history.OK
				gc.tags = append(gc.tags, "flipped")
			}
		}
	}
	// Lost lines (A4): the harness says a worker line was not an event;
	// sometimes it was a lost signal, dropped here.
	bad := 0
	if rng.IntN(7) == 0 {
		bad = 1
		gc.tags = append(gc.tags, "lost-line")
		var lost []int
		for i, s := range out {
			if s.e.F == history.OpLost {
				lost = append(lost, i)
			}
		}
		if len(lost) > 0 && rng.IntN(2) == 0 {
			i := lost[rng.IntN(len(lost))]
			out = append(out[:i], out[i+1:]...)
			gc.tags = append(gc.tags, "lost-signal-dropped")
		}
	}
	// Expectations and thresholds.
	if rng.IntN(10) == 0 && !meta.Lockless {
		yes := true
		meta.Expect.Violations = &yes
	}
	if rng.IntN(3) == 0 {
		meta.Thresholds = append(meta.Thresholds, drawThreshold(rng))
	}
	gc.meta = meta
	// Merge: marks, and the clients' events in time order; at one tick the
	// order of different clients' events is the merger's choice (A3).
	mk := func(t int, f string, m any) history.Event {
		e := history.Event{T: int64(base+t) * tick, Type: history.Mark, F: f}
		if m != nil {
			raw, _ := json.Marshal(m)
			e.Meta = raw
		}
		return e
	}
	gc.events = append(gc.events, mk(0, history.MarkCaseStart, meta))
	byTick := map[int][]stamped{}
	for _, s := range out {
		byTick[s.t] = append(byTick[s.t], s)
	}
	byTick[D] = append(byTick[D], stamped{t: D, seq: 0, e: mk(D, history.MarkCaseStop, nil)})
	for t := 1; t < E; t++ {
		evs := byTick[t]
		queues := map[string][]history.Event{}
		var who []string
		for _, s := range evs {
			if _, ok := queues[s.who]; !ok {
				who = append(who, s.who)
			}
			queues[s.who] = append(queues[s.who], s.e)
		}
		for len(who) > 0 {
			i := rng.IntN(len(who))
			q := queues[who[i]]
			gc.events = append(gc.events, q[0])
			if len(q) == 1 {
				who = append(who[:i], who[i+1:]...)
			} else {
				queues[who[i]] = q[1:]
			}
		}
	}
	gc.events = append(gc.events, mk(E, history.MarkHarness, history.HarnessStats{BadLines: bad, Cores: 2}))
	gc.events = append(gc.events, mk(E, history.MarkCaseEnd, nil))
	return gc
}

// drawThreshold draws a threshold on a figure of mutual exclusion.
func drawThreshold(rng *rand.Rand) string {
	switch rng.IntN(6) {
	case 0:
		return fmt.Sprintf("zombie_max < %dms", 1+rng.IntN(4))
	case 1:
		return "zombies == 0"
	case 2:
		return "violations == 0"
	case 3:
		return fmt.Sprintf("overlap_max <= %dms", rng.IntN(3))
	case 4:
		return fmt.Sprintf("zombie_max >= %dms", 1+rng.IntN(2))
	}
	return "zombies >= 1"
}

// generate draws one history: one case, the trials of one row, two
// concatenated runs, or one case written twice (the same run, A5).
func generate(seed uint64) *genHistory {
	rng := rand.New(rand.NewPCG(seed, 0x6f7261636c65))
	h := &genHistory{seed: seed}
	gap := 40
	switch r := rng.IntN(10); {
	case r < 6:
		h.cases = append(h.cases, genOne(rng, fmt.Sprintf("w%d", seed), 0))
	case r < 8: // the trials of one row
		n := 2 + rng.IntN(2)
		need := 1 + rng.IntN(n)
		for i := range n {
			c := genOne(rng, fmt.Sprintf("w%d", seed), i*gap)
			c.meta.Row, c.meta.Trial, c.meta.Trials, c.meta.Need = fmt.Sprintf("row%d", seed), i+1, n, need
			c.events[0].Meta, _ = json.Marshal(c.meta)
			c.tags = append(c.tags, "row")
			h.cases = append(h.cases, c)
		}
	case r < 9: // two runs concatenated
		for i := range 2 {
			c := genOne(rng, fmt.Sprintf("w%d-%d", seed, i), i*gap)
			c.tags = append(c.tags, "concatenated")
			h.cases = append(h.cases, c)
		}
	default: // one run written twice: the copy adds nothing (A5)
		c := genOne(rng, fmt.Sprintf("w%d", seed), 0)
		cp := &genCase{meta: c.meta, tags: append(slices.Clone(c.tags), "repeated"), repeatOf: 0}
		for _, e := range c.events {
			e.T += int64(gap) * tick
			cp.events = append(cp.events, e)
		}
		h.cases = append(h.cases, c, cp)
	}
	return h
}

// jsonl writes the history through the record's own encoder.
func (h *genHistory) jsonl() []byte {
	var b []byte
	for _, c := range h.cases {
		for i := range c.events {
			b = history.AppendJSON(b, &c.events[i])
			b = append(b, '\n')
		}
	}
	return b
}
