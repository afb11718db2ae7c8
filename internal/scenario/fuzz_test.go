package scenario

import (
	"os"
	"path/filepath"
	"syscall"
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
		// The CPU the process spent, not the time that passed: a busy
		// machine stretches the second, never the first. A blow-up (an
		// alias bomb took 7 s of it) is far beyond 2 s.
		cpu0 := cpuTime()
		s, err := Parse("fuzz.yaml", src)
		if d := cpuTime() - cpu0; d > 2*time.Second {
			t.Fatalf("Parse took %s of CPU", d)
		}
		if err != nil && !IsConfigError(err) {
			t.Fatalf("Parse returned a non-config error: %v", err)
		}
		if err == nil && (s == nil || len(s.Cases) == 0) {
			t.Fatalf("a valid scenario without cases")
		}
	})
}

// cpuTime is the CPU time this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
