package scenario

import (
	"fmt"
	"runtime"
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

// bomb is a scenario of about 600 bytes whose case options, through nested
// anchors, stand for 9^9 (387 million) strings.
const bomb = `name: bomb
workload: {duration: 1s}
cases:
  - name: c
    backend: redis
    options:
      a: &a [x, x, x, x, x, x, x, x, x]
      b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]
      c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]
      d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]
      e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]
      f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e]
      g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f]
      h: &h [*g, *g, *g, *g, *g, *g, *g, *g, *g]
      i: &i [*h, *h, *h, *h, *h, *h, *h, *h, *h]
`

// TestAliasBombIsRefused replays the attack of issue 41: a few hundred
// bytes of nested anchors in a case's options made validation allocate
// gigabytes. It is refused, naming the line, having allocated little.
func TestAliasBombIsRefused(t *testing.T) {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := Parse("bomb.yaml", []byte(bomb))
	runtime.ReadMemStats(&after)
	if err == nil || !strings.Contains(err.Error(), "aliases expand to more than") {
		t.Fatalf("a YAML bomb of %d bytes: %v", len(bomb), err)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 64<<20 {
		t.Errorf("refusing a %d-byte YAML bomb allocated %d MB", len(bomb), got>>20)
	}
}

// TestCaseCountsAreBounded: a scenario of more cases than MaxCases, or
// whose trials make more, is refused before any case is parsed.
func TestCaseCountsAreBounded(t *testing.T) {
	var b strings.Builder
	b.WriteString("name: many\nworkload: {duration: 1s}\ncases:\n")
	for i := 0; i <= MaxCases; i++ {
		fmt.Fprintf(&b, "  - {name: c%d, backend: local}\n", i)
	}
	if _, err := Parse("many.yaml", []byte(b.String())); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("at most %d a scenario", MaxCases)) {
		t.Errorf("%d cases: %v", MaxCases+1, err)
	}
	var vals []string
	for i := 1; i <= 100; i++ {
		vals = append(vals, fmt.Sprint(i))
	}
	sweep := "[" + strings.Join(vals, ",") + "]"
	trials := "name: trials\nworkload: {duration: 1s}\ncases:\n" +
		"  - {name: a, backend: local, trials: {count: 100, need: 1}, workload: {clients: {sweep: " + sweep + ", name: n}}}\n" +
		"  - {name: b, backend: local, trials: {count: 100, need: 1}, workload: {clients: {sweep: " + sweep + ", name: n}}}\n" +
		"  - {name: c, backend: local}\n"
	if _, err := Parse("trials.yaml", []byte(trials)); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("more than %d cases", MaxCases)) {
		t.Errorf("20,000 trials: %v", err)
	}
}
