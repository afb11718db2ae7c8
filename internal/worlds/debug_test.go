package worlds

import (
	"os"
	"strconv"
	"testing"
)

// TestShowSeed prints what the oracle reads of one seed (ORACLE_SHOW=seed).
func TestShowSeed(t *testing.T) {
	s := os.Getenv("ORACLE_SHOW")
	if s == "" {
		t.Skip("ORACLE_SHOW not set")
	}
	seed, _ := strconv.ParseUint(s, 10, 64)
	h := generate(seed)
	for i, c := range h.cases {
		rc := read(c.events)
		rc.choose()
		tr := enumerate(rc)
		t.Logf("case %d tags %v: worlds %d allowed %d min %+v max %+v", i+1, c.tags, tr.worlds, tr.allowed, tr.min, tr.max)
		for _, o := range rc.ops {
			t.Logf("  op c%d %s %s [%d,%d] %s choices %v", o.client, o.f, o.key, o.inv, o.comp, o.out, o.choices)
		}
		for _, b := range rc.beliefs {
			t.Logf("  belief %+v", b)
		}
	}
}
