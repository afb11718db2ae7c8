package checker

import (
	"slices"
	"time"
)

// mutex counts overlapping holds (MODEL §6).
type mutex struct {
	open []pending // examples whose overlap has not ended
	// overlaps are the lengths of the ended overlaps (ns), for the
	// duration figures; capped.
	overlaps []int64
	longest  int64
	// zombies are how long holders went on believing after the service
	// had certainly taken their grant back (ns); first is the first
	// overlap's beginning (-1: none).
	zombies   []int64
	zombieN   int
	zombieMax int64
	first     int64
	tentative int // overlaps not yet known to last
}

type pending struct {
	idx   int // index into the examples, -1 when not kept
	a, b  *hold
	since int64
	// counted: the overlap lasted beyond its first instant, so it is a
	// violation (MODEL §6: a hold that ends at the instant another begins
	// does not overlap it, whatever the file order of the two).
	counted bool
	seg     *segment
}

// maxOverlaps caps the overlap durations kept for the median.
const maxOverlaps = 100000

// begin opens an overlap of h with each hold of its key in force; each is
// a violation once it has lasted (commit).
func (m *mutex) begin(c *Case, h *hold) {
	for _, o := range h.kl.holds {
		if o.cl != h.cl {
			o.taken = min(o.taken, h.begin) // the service gave the key to another
		}
		m.open = append(m.open, pending{idx: -1, a: o, b: h, since: h.begin, seg: c.fig.seg()})
		m.tentative++
	}
}

// advance commits the overlaps that began before t: they lasted.
func (m *mutex) advance(c *Case, t int64) {
	if m.tentative == 0 {
		return
	}
	for i := range m.open {
		if p := &m.open[i]; !p.counted && p.since < t {
			m.commit(c, p)
		}
	}
}

func (m *mutex) commit(c *Case, p *pending) {
	p.counted = true
	m.tentative--
	if m.first < 0 {
		m.first = p.since
	}
	c.res.Violations++
	p.seg.violations++
	if len(c.res.Examples) < MaxExamples {
		o, h := p.a, p.b
		c.res.Examples = append(c.res.Examples, Overlap{
			Key: h.key, First: o.cl.proc, FirstSince: o.begin, FirstToken: o.token,
			Second: h.cl.proc, SecondSince: h.begin, SecondToken: h.token, Until: -1,
		})
		p.idx = len(c.res.Examples) - 1
	}
}

// end closes the overlaps h was part of; h has left its key's holds. One
// that h's release, lost signal or death ends at the instant it began
// lasted no time: no violation (MODEL §6: a tie decides nothing). One the
// case's (or the history's) end cuts off at its first instant lasted as
// far as the record goes: it counts.
func (m *mutex) end(c *Case, h *hold, t int64, why endReason) {
	if len(m.open) == 0 {
		return
	}
	kept := m.open[:0]
	for _, p := range m.open {
		if p.a != h && p.b != h {
			kept = append(kept, p)
			continue
		}
		if !p.counted {
			if t == p.since && why != byEnd {
				m.tentative--
				continue
			}
			m.commit(c, &p)
		}
		if p.idx >= 0 {
			c.res.Examples[p.idx].Until = t
		}
		m.ended(t - p.since)
	}
	m.open = kept
}

// finish commits what is still open where the case ends.
func (m *mutex) finish(c *Case) {
	for i := range m.open {
		if p := &m.open[i]; !p.counted {
			m.commit(c, p)
		}
	}
}

// zombie counts h's zombie time once its end, and whether it was good, is
// known (MODEL §6): from the latest instant the service may still have
// held the grant in an allowed world — the first the service said it had
// taken it back, or the latest its lease may run out (latest) — to the
// hold's end. A good hold's ok release says the grant was still in force
// at an instant after the hold ended: its lease ran out after.
func (m *mutex) zombie(h *hold, latest int64) {
	g := h.taken
	if !h.good() {
		g = min(g, latest)
	}
	if h.end < 0 || g >= h.end {
		return
	}
	d := h.end - g
	m.zombieN++
	m.zombieMax = max(m.zombieMax, d)
	if len(m.zombies) < maxOverlaps {
		m.zombies = append(m.zombies, d)
	}
}

func (m *mutex) ended(d int64) {
	if d > m.longest {
		m.longest = d
	}
	if len(m.overlaps) < maxOverlaps {
		m.overlaps = append(m.overlaps, d)
	}
}

// figures returns the longest and the median overlap, in ms.
func (m *mutex) figures() (longest, median float64) {
	if len(m.overlaps) == 0 {
		return 0, 0
	}
	s := slices.Clone(m.overlaps)
	slices.Sort(s)
	return ms(m.longest), ms(s[(len(s)-1)/2])
}

// MaxOverlapSample bounds Result.OverlapsMs.
const MaxOverlapSample = 2000

// sample returns up to MaxOverlapSample overlap lengths in ms, evenly
// spread over the ones kept.
func (m *mutex) sample() []float64 {
	n := len(m.overlaps)
	if n == 0 {
		return nil
	}
	step := max(1, n/MaxOverlapSample)
	out := make([]float64, 0, min(n, MaxOverlapSample))
	for i := 0; i < n && len(out) < MaxOverlapSample; i += step {
		out = append(out, ms(m.overlaps[i]))
	}
	return out
}

// zombieFigures returns how many holders were zombies, and the longest
// and median zombie time, in ms.
func (m *mutex) zombieFigures() (n int, longest, median float64) {
	if len(m.zombies) == 0 {
		return 0, 0, 0
	}
	s := slices.Clone(m.zombies)
	slices.Sort(s)
	return m.zombieN, ms(m.zombieMax), ms(s[(len(s)-1)/2])
}

func ms(ns int64) float64 { return float64(ns) / float64(time.Millisecond) }
