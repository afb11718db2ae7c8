package sim

import (
	"sort"
	"strings"
	"testing"
)

// TestLateCoverage: over 300 seeds, the late calls of MODEL §6 take every
// outcome (accepted, refused) and the expectations that tell a client's
// bug from its control (§13) reach every status they can give: so that
// TestAgainstChecker compares them where it matters.
func TestLateCoverage(t *testing.T) {
	if testing.Short() {
		t.Skip("coverage is the pass without -short's")
	}
	n := map[string]int{}
	for s := uint64(1); s <= 300; s++ {
		tr := Simulate(s).Truth(true)
		for _, c := range tr.Cases {
			if c.Skip != "" {
				n["not compared: "+c.Skip]++
				continue
			}
			l := c.Late
			if l.ReleasesAccepted > 0 {
				n["a late release accepted"]++
			}
			if l.ReleasesRefused > 0 {
				n["a late release refused"]++
			}
			if l.Releases > l.ReleasesAccepted+l.ReleasesRefused {
				n["a late release of unknown outcome or never sent"]++
			}
			if l.ExtendsAccepted > 0 {
				n["a late extension accepted"]++
			}
			if l.ExtendsRefused > 0 {
				n["a late extension refused"]++
			}
			e := c.Meta().Expect
			for what, asked := range map[string]bool{"late_releases_accepted": e.LateReleasesAccepted != nil,
				"late_extensions_accepted": e.LateExtensionsAccepted != nil, "linearizable": e.Linearizable != nil, "max_overlap": e.MaxOverlapNs > 0} {
				if asked && !e.Measure {
					n[what+" asked: "+c.Status]++
				}
			}
			for _, why := range c.InvalidReasons {
				if strings.Contains(why, "late calls asked of a case with none") {
					n["invalid: late calls asked of none"]++
				}
			}
		}
	}
	for _, w := range []string{"a late release accepted", "a late release refused", "a late extension accepted", "a late extension refused",
		"late_releases_accepted asked: ok", "late_releases_accepted asked: violation", "late_releases_accepted asked: not-reproduced", "invalid: late calls asked of none",
		"linearizable asked: ok", "linearizable asked: violation", "linearizable asked: not-reproduced", "max_overlap asked: ok", "max_overlap asked: violation"} {
		if n[w] == 0 {
			t.Errorf("never generated: %s", w)
		}
	}
	var ks []string
	for k := range n {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	var b strings.Builder
	for _, k := range ks {
		b.WriteString("\n  " + k + ": " + itoa(n[k]))
	}
	t.Logf("over seeds 1..300:%s", b.String())
}
