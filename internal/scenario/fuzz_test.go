package scenario

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// FuzzParse feeds the parser arbitrary text. It must never panic, must
// return either a scenario or *Errors, and must answer quickly: a slow
// input (a schedule that expands without bound, say) is a finding. The
// corpus is seeded with every shipped scenario and testdata/fuzz.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob("../../scenarios/*.yaml")
	known, _ := filepath.Glob("../../scenarios/known/*.yaml")
	usecases, _ := filepath.Glob("../../scenarios/usecases/*.yaml")
	known = append(known, usecases...)
	for _, p := range append(files, known...) {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte(good))
	f.Add([]byte(nemesisScenario))
	f.Fuzz(func(t *testing.T, src []byte) {
		start := time.Now()
		s, err := Parse("fuzz.yaml", src)
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("Parse took %s", d)
		}
		if err != nil && !IsConfigError(err) {
			t.Fatalf("Parse returned a non-config error: %v", err)
		}
		if err == nil && (s == nil || len(s.Cases) == 0) {
			t.Fatalf("a valid scenario without cases")
		}
	})
}
