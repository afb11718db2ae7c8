package sim

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
)

// Run is one simulated run of lockbench: several cases (single cases, rows
// of trials), written as one history, perhaps cut short, perhaps with a
// line the checker must refuse.
type Run struct {
	Seed   uint64
	Events []*Event
	lastT  int64
	Cases  []*caseRec
	cut    *cutSpec
	bad    *badLine
	blank  map[int]int // blank lines before event i
	// pre: an event before the first case-start: it belongs to no case,
	// and the history is refused with its line (MODEL §2)
	pre *Event
}

// cutSpec: the coordinator died. history.jsonl holds the first `lines`
// events and, when partial, the beginning of the next line; the tail
// journal, when journal >= 0, holds events [journal, visible) in full.
type cutSpec struct {
	visible  int
	lines    int
	partial  bool
	journal  int
	shuffled bool
	at       float64 // where in the partial line the file ends
	seed     uint64
}

// badLine: a line outside MODEL §1's language, inserted before event idx
// (or written in its place, when replace).
type badLine struct {
	idx     int
	raw     string
	what    string
	replace bool
	line    int // its line number in the file (1-based), set by Files
}

// Simulate builds the run of a seed. The same seed gives the same run.
func Simulate(seed uint64) *Run {
	rng := rand.New(rand.NewPCG(seed, 0x5eed5eed5eed))
	r := &Run{Seed: seed, lastT: -1, blank: map[int]int{}}
	plans := r.plan(rng)
	t := int64(1e9) + rng.Int64N(1e6)
	for _, cfg := range plans {
		cr := r.simulateCase(cfg, t)
		if cfg.thresholds {
			r.chooseThresholds(cr, rand.New(rand.NewPCG(cfg.seed, 99)))
		}
		r.Cases = append(r.Cases, cr)
		t = r.lastT + 1e6 + rng.Int64N(30e6)
	}
	r.damage(rng)
	return r
}

// damage chooses how the file is cut or spoilt.
func (r *Run) damage(rng *rand.Rand) {
	n := len(r.Events)
	switch p := rng.Float64(); {
	case p < 0.09:
		// cut, no journal
		m := r.cutPoint(rng)
		r.cut = &cutSpec{visible: m, lines: m, partial: true, journal: -1}
	case p < 0.18:
		m := r.cutPoint(rng)
		w := m - rng.IntN(min(40, m-1)+1)
		if w < 1 {
			w = 1
		}
		partial := w < m && rng.IntN(4) > 0
		j := w - rng.IntN(min(20, w)+1)
		if j < 1 {
			j = 1
		}
		if rng.IntN(3) == 0 {
			j = w // no overlap
		}
		r.cut = &cutSpec{visible: m, lines: w, partial: partial, journal: j, shuffled: rng.IntN(2) == 0}
		for _, c := range r.Cases {
			for _, i := range c.backdated {
				if i >= w && i < m {
					// the coordinator's journal is in time order: an event
					// a worker misdated would not be out of order there,
					// and would move; not what these histories test
					r.cut.journal, r.cut.visible = -1, w
				}
			}
		}
	case p < 0.23:
		c := r.Cases[rng.IntN(len(r.Cases))]
		i := c.startIdx + 1 + rng.IntN(r.lastOf(c)-c.startIdx)
		b := badLines(r.Events[i-1].T)
		k := rng.IntN(len(b))
		r.bad = &badLine{idx: i, raw: b[k][1], what: b[k][0]}
	case p < 0.265:
		// a case-start whose meta has a field it does not know (a
		// misspelt expectation): refused with its line (MODEL §1, §2)
		c := r.Cases[rng.IntN(len(r.Cases))]
		full := string(r.Events[c.startIdx].AppendJSON(nil))
		bad := [][3]string{
			{"a misspelt expectation in the meta", `"expect":{`, `"expect":{"violation":true,`},
			{"an unknown meta field", `"meta":{`, `"meta":{"lease_ms":500,`},
			{"a misspelt fault field in the meta", `"at_ns":`, `"at_ms":1,"at_ns":`},
		}
		k := rng.IntN(len(bad))
		if !strings.Contains(full, bad[k][1]) {
			k = 0
		}
		r.bad = &badLine{idx: c.startIdx, raw: strings.Replace(full, bad[k][1], bad[k][2], 1), what: bad[k][0], replace: true}
	case p < 0.285:
		// an event before the first case-start (MODEL §2)
		e := *r.Events[1+rng.IntN(min(5, n-1))]
		e.T = r.Events[0].T - 1 - rng.Int64N(1e6)
		e.Meta = nil
		if e.Type == "mark" && (e.F == "case-start" || e.F == "harness" || e.F == "store-totals") {
			e = Event{T: e.T, Type: "mark", F: "case-stop"}
		}
		r.pre = &e
	}
	if r.cut != nil {
		r.cut.at, r.cut.seed = rng.Float64(), rng.Uint64()
	}
	if rng.IntN(8) == 0 {
		for k := 0; k < 1+rng.IntN(3); k++ {
			r.blank[1+rng.IntN(n-1)]++
		}
	}
}

// cutPoint: where the coordinator died; at least the first case-start
// survives.
func (r *Run) cutPoint(rng *rand.Rand) int {
	n := len(r.Events)
	c := r.Cases[rng.IntN(len(r.Cases))]
	if rng.IntN(2) == 0 {
		c = r.Cases[len(r.Cases)-1]
	}
	lo, hi := c.startIdx+2, r.lastOf(c)+2
	if rng.IntN(6) == 0 {
		// just after a case-end: that case is whole, the rest missing
		if c.endIdx >= 0 && c.endIdx+1 < n {
			return c.endIdx + 1
		}
	}
	if hi > n-1 {
		hi = n - 1
	}
	if lo >= hi {
		return n - 1
	}
	return lo + rng.IntN(hi-lo)
}

// lastOf is the index of a case's last event: its case-end, or the event
// before the next case-start.
func (r *Run) lastOf(c *caseRec) int {
	if c.endIdx >= 0 {
		return c.endIdx
	}
	for i, o := range r.Cases {
		if o == c && i+1 < len(r.Cases) {
			return r.Cases[i+1].startIdx - 1
		}
	}
	return len(r.Events) - 1
}

// badLines: lines the checker must refuse (MODEL §1), dated t.
func badLines(t int64) [][2]string {
	ts := fmt.Sprint(t)
	op := `"type":"ok","f":"acquire","proc":"i1c0","key":"k0"`
	return [][2]string{
		{"t as a fraction", `{"t":` + ts + `.5,"type":"mark","f":"fault-idle","fault":"x"}`},
		{"negative token", `{"t":` + ts + `,` + op + `,"token":-3}`},
		{"token with an exponent", `{"t":` + ts + `,` + op + `,"token":1e3}`},
		{"token of 2^64", `{"t":` + ts + `,` + op + `,"token":18446744073709551616}`},
		{"token as a fraction", `{"t":` + ts + `,` + op + `,"token":2.0}`},
		{"unknown field", `{"t":` + ts + `,` + op + `,"token":3,"color":"red"}`},
		{"unknown type", `{"t":` + ts + `,"type":"maybe","f":"acquire","proc":"i1c0","key":"k0"}`},
		{"unknown operation", `{"t":` + ts + `,"type":"invoke","f":"grab","proc":"i1c0","key":"k0"}`},
		{"client proc of instance 0", `{"t":` + ts + `,"type":"invoke","f":"acquire","proc":"i0c0","key":"k0"}`},
		{"client proc without an instance", `{"t":` + ts + `,"type":"invoke","f":"acquire","proc":"c1","key":"k0"}`},
		{"acquire without a key", `{"t":` + ts + `,"type":"invoke","f":"acquire","proc":"i1c0"}`},
		{"t as a string", `{"t":"` + ts + `","type":"invoke","f":"acquire","proc":"i1c0","key":"k0"}`},
		{"negative t", `{"t":-5,"type":"invoke","f":"acquire","proc":"i1c0","key":"k0"}`},
		{"t of 2^63", `{"t":9223372036854775808,"type":"invoke","f":"acquire","proc":"i1c0","key":"k0"}`},
		{"lost as an invoke", `{"t":` + ts + `,"type":"invoke","f":"lost","proc":"i1c0","key":"k0"}`},
		{"not JSON", `{"t":` + ts + `,"type":"invoke","f":`},
		{"negative intended", `{"t":` + ts + `,"type":"invoke","f":"acquire","proc":"i1c0","key":"k0","intended":-1}`},
		{"fenced outside its words", `{"t":` + ts + `,"type":"mark","f":"res-read","proc":"i1c0","key":"k0","fenced":"maybe"}`},
		{"lost as a string", `{"t":` + ts + `,"type":"mark","f":"res-write","proc":"i1c0","key":"k0","lost":"yes"}`},
		{"missing type", `{"t":` + ts + `,"f":"acquire","proc":"i1c0","key":"k0"}`},
		{"a mark name as an operation", `{"t":` + ts + `,"type":"ok","f":"case-stop"}`},
	}
}

// Files writes the run: history.jsonl and, when the coordinator died with
// one, history.tail.jsonl (nil otherwise).
func (r *Run) Files() (history, tail []byte) {
	var b bytes.Buffer
	lines := 0
	line := func(s []byte) {
		b.Write(s)
		b.WriteByte('\n')
		lines++
	}
	n := len(r.Events)
	if r.cut != nil {
		n = r.cut.lines
	}
	if r.pre != nil {
		line(r.pre.AppendJSON(nil))
	}
	for i := 0; i < n; i++ {
		for k := 0; k < r.blank[i]; k++ {
			line(nil)
		}
		if r.bad != nil && r.bad.idx == i {
			line([]byte(r.bad.raw))
			r.bad.line = lines
			if r.bad.replace {
				continue
			}
		}
		line(r.Events[i].AppendJSON(nil))
	}
	if r.cut != nil && r.cut.partial {
		full := r.Events[r.cut.lines].AppendJSON(nil)
		k := 1 + int(r.cut.at*float64(len(full)-2))
		b.Write(full[:k])
	}
	if r.cut != nil && r.cut.journal >= 0 {
		var t bytes.Buffer
		evs := r.Events[r.cut.journal:r.cut.visible]
		order := make([]int, len(evs))
		for i := range order {
			order[i] = i
		}
		if r.cut.shuffled {
			order = interleave(evs, rand.New(rand.NewPCG(r.cut.seed, 1)))
		}
		for _, i := range order {
			t.Write(evs[i].AppendJSON(nil))
			t.WriteByte('\n')
		}
		tail = t.Bytes()
	}
	return b.Bytes(), tail
}

// interleave orders events as they might reach the coordinator: each
// source's (instance's, or the coordinator's own) events in order, the
// sources mixed.
func interleave(evs []*Event, rng *rand.Rand) []int {
	src := map[string][]int{}
	var names []string
	for i, e := range evs {
		s := "coordinator"
		if e.Type != "mark" && e.Proc != "" {
			s = strings.SplitN(e.Proc, "c", 2)[0]
		}
		if src[s] == nil {
			names = append(names, s)
		}
		src[s] = append(src[s], i)
	}
	sort.Strings(names)
	var out []int
	for len(out) < len(evs) {
		s := names[rng.IntN(len(names))]
		if len(src[s]) == 0 {
			continue
		}
		out = append(out, src[s][0])
		src[s] = src[s][1:]
	}
	return out
}

// Visible is how many events the checker should see: all of them, or the
// prefix that survived a cut (merged with its journal).
func (r *Run) visible(withJournal bool) int {
	if r.cut == nil {
		return len(r.Events)
	}
	if withJournal && r.cut.journal >= 0 {
		return r.cut.visible
	}
	return r.cut.lines
}

// HasJournal: the run writes a tail journal.
func (r *Run) HasJournal() bool { return r.cut != nil && r.cut.journal >= 0 }

// Describe says in a line what the run is made of.
func (r *Run) Describe() string {
	var parts []string
	for _, c := range r.Cases {
		s := c.meta.Name + "/" + c.cfg.variant
		if c.meta.Row != "" {
			s += fmt.Sprintf("#%d", c.meta.Trial)
		}
		parts = append(parts, s)
	}
	d := strings.Join(parts, " ")
	if r.cut != nil {
		d += fmt.Sprintf(" | cut at event %d of %d (lines %d, partial %v, journal from %d, shuffled %v)", r.cut.visible, len(r.Events), r.cut.lines, r.cut.partial, r.cut.journal, r.cut.shuffled)
	}
	if r.bad != nil {
		d += " | bad line: " + r.bad.what
	}
	if r.pre != nil {
		d += " | an event before the first case-start"
	}
	return d
}
