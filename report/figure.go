package report

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/lockbench/lockbench/verdict"
)

// Figure is one of a run's figures: the image it draws (Name.png and
// Name.svg in the results folder), the slot of the report it is shown in,
// the sentence that says how to read it, what the results folder's table
// says of the file, and Draw, which draws it to the base path given and
// says whether it did (a figure with nothing to show draws nothing). Each
// plot's own file registers its figure, so a new figure is one file.
type Figure struct {
	Name     string // base name of the files
	Alt      string // the image's alternative text
	Slot     Slot   // where the report shows it
	Order    int    // its place among the figures of its slot
	Caption  string // how to read it, under the image
	Contents string // what docs/results.md's table says of its files
	Draw     func(base string, s *verdict.Summary) (bool, error)
}

// Slot is a place in the report where figures stand.
type Slot string

// The report's slots, in the order the report shows them.
const (
	SlotDecision Slot = "decision" // under the decision view's table
	SlotJobs     Slot = "jobs"     // under the jobs decision view's table
	SlotEnvelope Slot = "envelope" // under the safety envelope's table, when there is one
	SlotSafety   Slot = "safety"   // before the safety table, whatever the run
	SlotLatency  Slot = "latency"  // under the latency table
)

var registry []Figure

// registerFigure adds a figure to the registry; two of one name, or one
// in no known slot, is a programming error found by the package's tests.
func registerFigure(f Figure) {
	registry = append(registry, f)
	slices.SortStableFunc(registry, func(a, b Figure) int {
		if c := slices.Index(slots, a.Slot) - slices.Index(slots, b.Slot); c != 0 {
			return c
		}
		return a.Order - b.Order
	})
}

// slots are the slots in the report's order.
var slots = []Slot{SlotJobs, SlotDecision, SlotEnvelope, SlotSafety, SlotLatency}

// Figures returns the registered figures, in the report's order.
func Figures() []Figure { return slices.Clone(registry) }

// drawFigures draws every registered figure into dir and returns the
// names of those drawn.
func drawFigures(dir string, s *verdict.Summary) (map[string]bool, error) {
	drawn := map[string]bool{}
	for _, f := range registry {
		ok, err := f.Draw(filepath.Join(dir, f.Name), s)
		if err != nil {
			return nil, fmt.Errorf("figure %s: %w", f.Name, err)
		}
		drawn[f.Name] = ok
	}
	return drawn, nil
}

// writeFigures writes the drawn figures of one slot, each with its
// caption.
func writeFigures(b *strings.Builder, slot Slot, drawn map[string]bool) {
	for _, f := range registry {
		if f.Slot == slot && drawn[f.Name] {
			caption(b, f.Alt, f.Name+".png", f.Caption)
		}
	}
}
