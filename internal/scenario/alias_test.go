package scenario

import (
	"strings"
	"testing"
)

// TestOptionsAliasesTravel: options written once and referred to by an
// alias, or holding one, reach the workers whole (the YAML they are sent
// as resolves on its own).
func TestOptionsAliasesTravel(t *testing.T) {
	src := `
name: aliases
workload: {duration: 1s}
cases:
  - {name: a, backend: redis, options: &opts {drift_factor: 0.02, read_timeout: &rt 2s}}
  - {name: b, backend: redis, options: *opts}
  - {name: c, backend: redis, options: {drift_factor: 0.03, read_timeout: *rt}}
`
	sc, err := Parse("aliases.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"drift_factor: 0.02", "drift_factor: 0.02", "drift_factor: 0.03"} {
		got := string(sc.Cases[i].Options)
		if !strings.Contains(got, want) || !strings.Contains(got, "read_timeout: 2s") || strings.ContainsAny(got, "*&") {
			t.Errorf("case %s options sent as %q, want %s and read_timeout: 2s, no anchors or aliases", sc.Cases[i].Name, got, want)
		}
	}
}
