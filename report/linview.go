package report

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"

	"github.com/anishathalye/porcupine"

	"github.com/lockbench/lockbench/verdict"
)

// linViewName is the file of a key's porcupine visualization.
func linViewName(caseName, key string) string {
	return fmt.Sprintf("linearizability-%s-%s.html", caseName, key)
}

// writeLinearizationViews writes porcupine's HTML visualization of every
// key whose history is not linearizable (or could not be decided), with
// the case's fault windows annotated.
func writeLinearizationViews(dir string, s *verdict.Summary) error {
	for _, c := range s.Cases {
		lin := c.Linearizability
		for _, key := range slices.Sorted(maps.Keys(lin.Info)) {
			info := lin.Info[key]
			var notes []porcupine.Annotation
			for _, w := range c.Metrics.Timeline().Windows {
				end := max(w.End, w.Start)
				notes = append(notes, porcupine.Annotation{Tag: "faults", Start: w.Start, End: end,
					Description: fmt.Sprintf("%s on %s", w.Fault, w.Target), BackgroundColor: "#f4cccc"})
			}
			info.AddAnnotations(notes)
			if err := porcupine.VisualizePath(lin.Model, info, filepath.Join(dir, linViewName(c.Check.Case, key))); err != nil {
				return fmt.Errorf("write linearizability view of %s/%s: %w", c.Check.Case, key, err)
			}
		}
	}
	return nil
}
