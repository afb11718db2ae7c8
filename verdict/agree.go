package verdict

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// Agreement says whether runs of one profile tell the same story: the
// same verdict for every row, and rates of two holders (per row, and per
// decision cell) whose 95% intervals overlap. A row whose verdict flipped
// between runs, or a rate whose intervals are disjoint, is evidence that
// held by luck in one of them (or a lock that changed): what the stability
// check (make stability) and the envelope's repeat (make envelope-twice)
// report.
type Agreement struct {
	// Runs are the run ids, in the order given.
	Runs []string `json:"runs"`
	// Rows are every row present in two runs or more, in first-run order.
	Rows []RowAgreement `json:"rows"`
	// Cells are every decision cell (backend × class) present in two runs
	// or more.
	Cells []CellAgreement `json:"cells"`
	// Flipped and Disjoint count the rows whose verdict differed and the
	// rows and cells whose two-holders or damage intervals did not
	// overlap.
	Flipped  int `json:"flipped"`
	Disjoint int `json:"disjoint"`
}

// RowAgreement is one row across runs: its verdict and its two-holders
// rate in each (absent where the run did not hold the row).
type RowAgreement struct {
	Row        string       `json:"row"`
	Backend    string       `json:"backend"`
	Verdicts   []RowVerdict `json:"verdicts"`
	TwoHolders []*Rate      `json:"two_holders"`
	Flipped    bool         `json:"flipped"`
	Disjoint   bool         `json:"disjoint"`
}

// CellAgreement is one decision cell across runs.
type CellAgreement struct {
	Backend    string  `json:"backend"`
	Class      string  `json:"class"`
	TwoHolders []*Rate `json:"two_holders"`
	Damage     []*Rate `json:"damage"`
	Disjoint   bool    `json:"disjoint"`
}

// Agree compares the summaries of runs of one profile.
func Agree(runs ...*Summary) *Agreement {
	a := &Agreement{}
	rowIdx := map[string]int{}
	for i, s := range runs {
		id := s.RunID
		if id == "" {
			id = fmt.Sprintf("run %d", i+1)
		}
		a.Runs = append(a.Runs, id)
		for _, r := range s.Rows {
			j, ok := rowIdx[r.Row]
			if !ok {
				a.Rows = append(a.Rows, RowAgreement{Row: r.Row, Backend: r.Backend, Verdicts: make([]RowVerdict, len(runs)), TwoHolders: make([]*Rate, len(runs))})
				j = len(a.Rows) - 1
				rowIdx[r.Row] = j
			}
			rate := r.TwoHolders
			a.Rows[j].Verdicts[i] = r.Verdict
			a.Rows[j].TwoHolders[i] = &rate
		}
	}
	// Rows seen in one run only say nothing about agreement.
	a.Rows = slices.DeleteFunc(a.Rows, func(r RowAgreement) bool { return present(r.TwoHolders) < 2 })
	for i := range a.Rows {
		r := &a.Rows[i]
		var vs []RowVerdict
		for _, v := range r.Verdicts {
			if v != "" && !slices.Contains(vs, v) {
				vs = append(vs, v)
			}
		}
		r.Flipped = len(vs) > 1
		r.Disjoint = disjoint(r.TwoHolders)
		if r.Flipped {
			a.Flipped++
		}
		if r.Disjoint {
			a.Disjoint++
		}
	}
	type key struct{ backend, class string }
	cells := map[key]*CellAgreement{}
	var order []key
	for i, s := range runs {
		d := s.Decision
		if d == nil {
			d = NewDecision(s)
		}
		for _, row := range d.Rows {
			for class, c := range row.Cells {
				k := key{row.Backend, class}
				ca := cells[k]
				if ca == nil {
					ca = &CellAgreement{Backend: row.Backend, Class: class, TwoHolders: make([]*Rate, len(runs)), Damage: make([]*Rate, len(runs))}
					cells[k] = ca
					order = append(order, k)
				}
				th, dm := c.TwoHolders, c.Damage
				if th.Of > 0 {
					ca.TwoHolders[i] = &th
				}
				if dm.Of > 0 {
					ca.Damage[i] = &dm
				}
			}
		}
	}
	backendRank := map[string]int{}
	for _, k := range order {
		if _, ok := backendRank[k.backend]; !ok {
			backendRank[k.backend] = len(backendRank)
		}
	}
	sort.SliceStable(order, func(i, j int) bool {
		if bi, bj := backendRank[order[i].backend], backendRank[order[j].backend]; bi != bj {
			return bi < bj
		}
		if ci, cj := classRank(order[i].class), classRank(order[j].class); ci != cj {
			return ci < cj
		}
		return order[i].class < order[j].class
	})
	for _, k := range order {
		ca := cells[k]
		if present(ca.TwoHolders) < 2 && present(ca.Damage) < 2 {
			continue
		}
		ca.Disjoint = disjoint(ca.TwoHolders) || disjoint(ca.Damage)
		if ca.Disjoint {
			a.Disjoint++
		}
		a.Cells = append(a.Cells, *ca)
	}
	return a
}

// classRank orders classes as the decision view does, unknown ones last.
func classRank(c string) int {
	if i := slices.Index(ClassOrder, c); i >= 0 {
		return i
	}
	return len(ClassOrder)
}

func present(rs []*Rate) int {
	n := 0
	for _, r := range rs {
		if r != nil && r.Of > 0 {
			n++
		}
	}
	return n
}

// disjoint reports whether two of the rates with a value have 95%
// intervals that do not overlap.
func disjoint(rs []*Rate) bool {
	for i, a := range rs {
		if a == nil || a.Of == 0 {
			continue
		}
		for _, b := range rs[i+1:] {
			if b == nil || b.Of == 0 {
				continue
			}
			if a.High < b.Low || b.High < a.Low {
				return true
			}
		}
	}
	return false
}

// Agreed reports whether the runs agree: no verdict flipped, no intervals
// disjoint.
func (a *Agreement) Agreed() bool { return a.Flipped == 0 && a.Disjoint == 0 }

// Lines says, one line each, what disagreed (nothing when all agreed).
func (a *Agreement) Lines() []string {
	var out []string
	rates := func(rs []*Rate) string {
		var parts []string
		for _, r := range rs {
			if r == nil {
				parts = append(parts, "—")
				continue
			}
			parts = append(parts, r.String())
		}
		return strings.Join(parts, " | ")
	}
	for _, r := range a.Rows {
		if r.Flipped {
			var vs []string
			for _, v := range r.Verdicts {
				if v == "" {
					v = "—"
				}
				vs = append(vs, string(v))
			}
			out = append(out, fmt.Sprintf("row %s: verdict flipped: %s", r.Row, strings.Join(vs, " | ")))
		}
		if r.Disjoint {
			out = append(out, fmt.Sprintf("row %s: two holders, intervals disjoint: %s", r.Row, rates(r.TwoHolders)))
		}
	}
	for _, c := range a.Cells {
		if c.Disjoint {
			out = append(out, fmt.Sprintf("cell %s × %s: intervals disjoint: two holders %s; damage %s", c.Backend, c.Class, rates(c.TwoHolders), rates(c.Damage)))
		}
	}
	return out
}

// Repeated says why the runs given are not independent samples (MODEL
// §17, A5), or "" when they are: two of them have one run id, or share a
// trial (one digest: a copy of a run's folder under another id). A run
// repeated is one run, and agreeing with itself shows nothing.
func Repeated(runs ...*Summary) string {
	ids := map[string]int{}
	trials := map[string]int{}
	for i, s := range runs {
		if s.RunID != "" {
			if j, ok := ids[s.RunID]; ok {
				return fmt.Sprintf("runs %d and %d are one run (run id %s)", j+1, i+1, s.RunID)
			}
			ids[s.RunID] = i
		}
		for _, c := range s.Cases {
			if c.Digest == "" {
				continue
			}
			if j, ok := trials[c.Digest]; ok && j != i {
				return fmt.Sprintf("runs %d and %d hold the same trial (case %s, digest %s): one is a copy of the other", j+1, i+1, c.Check.Case, c.Digest)
			}
			trials[c.Digest] = i
		}
	}
	return ""
}
