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
	zombies []int64
	first   int64
}

type pending struct {
	idx    int // index into the examples, -1 when not kept
	a, b   *hold
	since  int64
	closed bool
}

// maxOverlaps caps the overlap durations kept for the median.
const maxOverlaps = 100000

func (m *mutex) begin(c *Case, h *hold) {
	for _, o := range h.kl.holds {
		if o.cl != h.cl && h.begin < o.gone {
			o.gone = h.begin // the service gave the key to another
		}
		if m.first < 0 {
			m.first = h.begin
		}
		c.res.Violations++
		c.res.Segments[len(c.res.Segments)-1].Violations++
		idx := -1
		if len(c.res.Examples) < MaxExamples {
			c.res.Examples = append(c.res.Examples, Overlap{
				Key: h.key, First: o.cl.proc, FirstSince: o.begin, FirstToken: o.token,
				Second: h.cl.proc, SecondSince: h.begin, SecondToken: h.token, Until: -1,
			})
			idx = len(c.res.Examples) - 1
		}
		m.open = append(m.open, pending{idx: idx, a: o, b: h, since: h.begin})
	}
}

// end closes the overlaps h was part of; h has left its key's holds.
func (m *mutex) end(c *Case, h *hold, t int64) {
	if h.gone < t && len(m.zombies) < maxOverlaps {
		m.zombies = append(m.zombies, t-h.gone)
	}
	if len(m.open) == 0 {
		return
	}
	kept := m.open[:0]
	for _, p := range m.open {
		if p.a == h || p.b == h {
			if p.idx >= 0 {
				c.res.Examples[p.idx].Until = t
			}
			m.ended(t - p.since)
			continue
		}
		kept = append(kept, p)
	}
	m.open = kept
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
	return len(s), ms(s[len(s)-1]), ms(s[(len(s)-1)/2])
}

func ms(ns int64) float64 { return float64(ns) / float64(time.Millisecond) }
