package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/lockbench/lockbench/faults"
	"github.com/lockbench/lockbench/internal/cluster"
)

// modesTable is the README's fault-support table (bench list -modes): a
// row per fault, a column per deployment mode, and in each cell the
// classes of the fault's targets the mode acts on (✓: all of them; —:
// none), footnoted where validation adds a condition (cluster.Mode's
// Condition). It is made from cluster.Mode alone, the statement
// validation enforces; a test checks the README holds it unchanged.
func modesTable() string {
	ms := cluster.Modes()
	var b strings.Builder
	b.WriteString("| fault | action |")
	for _, m := range ms {
		b.WriteString(" " + m.Title + " |")
	}
	b.WriteString("\n|---|---|" + strings.Repeat("---|", len(ms)) + "\n")
	var notes []string
	mark := func(note string) string {
		i := slices.Index(notes, note)
		if i < 0 {
			notes = append(notes, note)
			i = len(notes) - 1
		}
		return fmt.Sprintf("<sup>%d</sup>", i+1)
	}
	for _, f := range faults.All() {
		fmt.Fprintf(&b, "| `%s` | %s |", f.Name, f.Action)
		all := cluster.Classes(f)
		for _, m := range ms {
			on := m.Carries(f)
			var cell string
			switch {
			case len(on) == 0:
				cell = "—"
			case len(on) == len(all) && m.Condition(f, cluster.OnServer) == "":
				cell = "✓"
			default:
				var parts []string
				for _, o := range on {
					p := string(o)
					if c := m.Condition(f, o); c != "" {
						p += mark(c)
					}
					parts = append(parts, p)
				}
				cell = strings.Join(parts, ", ")
			}
			b.WriteString(" " + cell + " |")
		}
		b.WriteString("\n")
	}
	if len(notes) > 0 {
		b.WriteString("\n")
		for i, n := range notes {
			fmt.Fprintf(&b, "<sup>%d</sup> %s.\n", i+1, n)
		}
	}
	return b.String()
}

// howTable is a mode's mapping of every fault (bench list -mode NAME): the
// classes of targets it acts on there, and how the mode performs the
// fault's action, or what would and why it does not (cluster.Mode.How).
// docs/architecture.md holds the Kubernetes mode's; a test keeps it so.
func howTable(m cluster.Mode) string {
	var b strings.Builder
	fmt.Fprintf(&b, "| fault | action | in %s | how |\n|---|---|---|---|\n", m.Title)
	for _, f := range faults.All() {
		on := m.Carries(f)
		cell := "—"
		if len(on) > 0 {
			var parts []string
			for _, o := range on {
				parts = append(parts, string(o))
			}
			cell = strings.Join(parts, ", ")
		}
		how := m.How[f.Action]
		if how == "" {
			how = "—"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", f.Name, f.Action, cell, how)
	}
	return b.String()
}
