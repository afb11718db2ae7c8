package report

import "github.com/lockbench/lockbench/internal/layout"

// The per-case files the report writes into a results folder (the run's
// figures are the figure registry's: Figures).
func init() {
	layout.RegisterFile(layout.File{Order: 90, Name: timelineName("<case>") + ".png", Also: []string{".svg"},
		Contents: "for a case with faults or violations: one lane per client, each believed hold of one key a bar, overlapping holds in red, writes the fencing token refused as ×, late writes that landed as ▲, fault windows shaded"})
	layout.RegisterFile(layout.File{Order: 100, Name: timeseriesName("<case>") + ".png", Also: []string{".svg"},
		Contents: "for a case with faults, over the whole case: acquisitions per second and the slowest acquisition of each 250 ms (a gap where nothing was acquired), fault windows shaded"})
	layout.RegisterFile(layout.File{Order: 110, Name: linViewName("<case>", "<key>"),
		Contents: "porcupine's visualization of a key whose lock history is not linearizable (or could not be decided), fault windows annotated; open it in a browser"})
}
