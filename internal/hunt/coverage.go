package hunt

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/lockbench/lockbench/internal/realized"
)

// Cell is one cell of a hunt's coverage: a fault kind, the phase the
// lock was in when it began, and its window in leases.
type Cell struct {
	Kind   string `json:"kind"`
	Phase  string `json:"phase"`
	Window string `json:"window"`
}

// CellCount is a cell with its count, for hunt.json.
type CellCount struct {
	Cell
	Faults int `json:"faults"`
}

// List is every cell of the space with its count, in table order.
func (c *Coverage) List() []CellCount {
	var out []CellCount
	for _, cl := range c.Cells() {
		out = append(out, CellCount{cl, c.Count[cl]})
	}
	return out
}

// Windows are the window classes of the coverage table, in leases.
var windowClasses = []string{"<0.5×", "0.5–1×", "1–2×", "≥2×"}

// WindowClass is the class of a window of d with lease lease.
func WindowClass(d, lease time.Duration) string {
	if lease <= 0 {
		return windowClasses[0]
	}
	x := float64(d) / float64(lease)
	switch {
	case x < 0.5:
		return windowClasses[0]
	case x < 1:
		return windowClasses[1]
	case x < 2:
		return windowClasses[2]
	}
	return windowClasses[3]
}

// Coverage counts the faults a hunt injected, per cell, and its trials.
type Coverage struct {
	Kinds  []string
	Lease  time.Duration
	Count  map[Cell]int
	Trials int
	// Unapplied counts faults that never took effect (their phase is
	// unknown): they covered nothing.
	Unapplied int
}

// NewCoverage returns an empty coverage over kinds.
func NewCoverage(kinds []string, lease time.Duration) *Coverage {
	return &Coverage{Kinds: kinds, Lease: lease, Count: map[Cell]int{}}
}

// Add counts a trial's realized faults.
func (c *Coverage) Add(t realized.Trial) {
	c.Trials++
	for _, f := range t.Faults {
		if !f.Applied || f.Phase == realized.PhaseUnknown {
			c.Unapplied++
			continue
		}
		c.Count[Cell{f.Type, f.Phase, WindowClass(time.Duration(f.ForNs), c.Lease)}]++
	}
}

// phases are the phases the table has columns for: every phase a fault
// can land in.
var phases = []string{realized.PhaseWaiting, realized.PhaseHolding, realized.PhaseExtending, realized.PhaseReleasing, realized.PhaseIdle}

// Cells is every cell of the space, kinds × phases × windows.
func (c *Coverage) Cells() []Cell {
	var out []Cell
	for _, k := range c.Kinds {
		for _, p := range phases {
			for _, w := range windowClasses {
				out = append(out, Cell{k, p, w})
			}
		}
	}
	return out
}

// Covered is how many cells of the space have at least one fault.
func (c *Coverage) Covered() (covered, of int) {
	cells := c.Cells()
	for _, cl := range cells {
		if c.Count[cl] > 0 {
			covered++
		}
	}
	return covered, len(cells)
}

// Least returns the n cells with the fewest faults (ties in table
// order).
func (c *Coverage) Least(n int) []Cell {
	cells := c.Cells()
	sort.SliceStable(cells, func(i, j int) bool { return c.Count[cells[i]] < c.Count[cells[j]] })
	return cells[:min(n, len(cells))]
}

// Table writes the coverage as a Markdown table: a row per kind and
// phase, a column per window class.
func (c *Coverage) Table() string {
	var b strings.Builder
	fmt.Fprintf(&b, "| fault | phase | %s |\n|---|---|%s\n", strings.Join(windowClasses, " | "), strings.Repeat("---:|", len(windowClasses)))
	for _, k := range c.Kinds {
		for _, p := range phases {
			fmt.Fprintf(&b, "| %s | %s |", k, p)
			for _, w := range windowClasses {
				fmt.Fprintf(&b, " %d |", c.Count[Cell{k, p, w}])
			}
			b.WriteString("\n")
		}
	}
	return b.String()
}

// String is the coverage in one line, for progress.
func (c *Coverage) String() string {
	cov, of := c.Covered()
	return fmt.Sprintf("%d trials, %d of %d cells covered", c.Trials, cov, of)
}
