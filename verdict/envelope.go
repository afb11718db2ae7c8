package verdict

import (
	"sort"
)

// EnvelopePoint is one point of a swept case: the swept magnitude and the
// rate at which two holders were seen there.
type EnvelopePoint struct {
	X     float64 `json:"x"`
	Value string  `json:"value"`
	Rate  Rate    `json:"two_holders"`
}

// EnvelopeLine is one swept case (one backend) across its points.
type EnvelopeLine struct {
	Case    string `json:"case"`
	Backend string `json:"backend"`
	Axis    string `json:"axis"`
	// Lockless: no point of the line has a rate of two holders (MODEL
	// §17, A6): the backend takes no lock.
	Lockless bool            `json:"lockless,omitempty"`
	Points   []EnvelopePoint `json:"points"`
}

// Envelope collects, for every case swept over one axis, the rate of two
// holders at each point: the safety envelope. Points are the rows of the
// case's points, each over its decided trials.
func Envelope(s *Summary) []EnvelopeLine {
	type key struct{ base, backend string }
	lines := map[key]*EnvelopeLine{}
	var order []key
	seenRow := map[string]bool{}
	for _, c := range s.Cases {
		sp := c.Check.Meta.Sweep
		if sp == nil || len(sp.X) != 1 {
			continue
		}
		row := c.Check.Meta.Row
		if row == "" {
			row = c.Check.Meta.Name
		}
		if seenRow[row] {
			continue
		}
		seenRow[row] = true
		k := key{sp.Case, c.Check.Backend}
		l := lines[k]
		if l == nil {
			l = &EnvelopeLine{Case: sp.Case, Backend: c.Check.Backend, Axis: sp.Labels[0], Lockless: c.Check.Meta.Lockless}
			lines[k] = l
			order = append(order, k)
		}
		for _, r := range s.Rows {
			if r.Row == row {
				l.Points = append(l.Points, EnvelopePoint{X: sp.X[0], Value: sp.Values[0], Rate: r.TwoHolders})
			}
		}
	}
	var out []EnvelopeLine
	for _, k := range order {
		l := lines[k]
		sort.Slice(l.Points, func(i, j int) bool { return l.Points[i].X < l.Points[j].X })
		out = append(out, *l)
	}
	return out
}
