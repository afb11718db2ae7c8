package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"unicode"

	"github.com/lockbench/lockbench/internal/exitcode"
)

// hostileScenarios are the files issue 41 replayed against validation,
// each with what its refusal must say.
var hostileScenarios = []struct{ name, body, want string }{
	{"an alias bomb", `name: bomb
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
`, "aliases expand to more than"},
	{"a 292-year ttl", "name: x\ncases: [{name: a, backend: local, workload: {ttl: 2562047h}}]\n", ":2: cases[0] (a).workload: \"2562047h\" is longer than any duration lockbench takes"},
	{"a rate of 1e18", "name: x\nworkload: {duration: 2s, rate: {per_second: 1e18}}\ncases: [{name: a, backend: local}]\n", ":2: workload.rate: 1e+18 per second is more than lockbench paces"},
	{"20M operations", "name: x\nworkload: {duration: 200s, rate: {per_second: 100000}}\ncases: [{name: a, backend: local}]\n", "plans 2e+07 operations, each a few history lines (at most 10000000 a case)"},
	{"10,001 cases", manyCases(10001), "at most 10000 a scenario"},
	{"a case name with a terminal escape", "name: x\ncases: [{name: \"a\\e[31mred\", backend: local}]\n", `:2: cases[0] (a\x1b[31mred).name`},
	{"a case name with a newline", "name: x\ncases: [{name: \"a\\nbench: all clear\", backend: local}]\n", `(a\nbench: all clear).name`},
}

func manyCases(n int) string {
	var b strings.Builder
	b.WriteString("name: many\nworkload: {duration: 1s}\ncases:\n")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "  - {name: c%d, backend: local}\n", i)
	}
	return b.String()
}

// TestHostileInputIsExit104: each hostile scenario of issue 41, given to
// bench validate and to bench run as a process of its own, exits 104 by
// its exit code (not only a message), says what is wrong at which line,
// and prints no control character a terminal would act on.
func TestHostileInputIsExit104(t *testing.T) {
	for _, h := range hostileScenarios {
		t.Run(h.name, func(t *testing.T) {
			path := writeScenario(t, h.body)
			for _, cmd := range []string{"validate", "run"} {
				args := []string{cmd, path}
				if cmd == "run" {
					args = []string{cmd, "-dir", filepath.Join(t.TempDir(), "out"), path}
				}
				stdout, stderr, err := runBench(t, nil, args...)
				if got := exitcode.Of(err); got != exitcode.Config {
					t.Errorf("bench %s: exit %d, want %d (%v)", cmd, got, exitcode.Config, err)
				}
				out := stdout + stderr
				if !strings.Contains(out, h.want) {
					t.Errorf("bench %s does not say %q:\n%s", cmd, h.want, out)
				}
				if i := strings.IndexFunc(out, func(r rune) bool { return unicode.IsControl(r) && r != '\n' }); i >= 0 {
					t.Errorf("bench %s printed a control character (%q) of the file:\n%q", cmd, out[i], out)
				}
				if strings.Contains(out, "\nbench: all clear") {
					t.Errorf("bench %s printed a name's newline as a line of its own:\n%s", cmd, out)
				}
			}
		})
	}
}
