package scenario

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/lockbench/lockbench/faults"
	"github.com/lockbench/lockbench/history"
	"github.com/lockbench/lockbench/internal/cluster"
	"github.com/lockbench/lockbench/internal/control"
	"github.com/lockbench/lockbench/internal/targets"
)

const good = `
name: t
seed: 7
workload:
  duration: 3s
  instances: 2
  clients: 1
cases:
  - name: a
    backend: redis
    options: {persistence: everysec}
    workload: {ttl: 500ms}
    faults:
      - {type: pause, target: holder, at: 1s, for: 1s}
      - {type: latency, target: link:redis-1, at: 500ms, for: 1s, latency: 20ms, jitter: 5ms}
      - {type: kill, target: redis-1, at: 2s, for: 500ms}
      - {type: partition, target: link:redis-1@instance-2, at: 2600ms, for: 100ms}
  - name: e
    backend: etcd
    workload: {keys: {count: 2}}
    faults:
      - {type: kill, target: leader, at: 1s, for: 1s}
      - {type: pause, target: holder-of:k1, at: 1s, for: 1s}
      - {type: pause, target: a-waiter, at: 2500ms, for: 100ms}
  - name: b
    backend: local
    expect: {violations: true}
`

func TestParseGood(t *testing.T) {
	s, err := Parse("good.yaml", []byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if s.Seed != 7 || len(s.Cases) != 3 {
		t.Fatalf("seed=%d cases=%d", s.Seed, len(s.Cases))
	}
	a := s.Cases[0]
	if a.Workload.TTL.D() != 500*time.Millisecond || a.Workload.Duration.D() != 3*time.Second || a.Workload.Instances != 2 {
		t.Errorf("workload override not applied: %+v", a.Workload)
	}
	if s.Cases[2].Workload.TTL.D() != time.Second {
		t.Errorf("case b should keep the default ttl, got %s", s.Cases[2].Workload.TTL)
	}
	if len(a.Faults) != 4 || a.Faults[0].Name != "pause-1" || a.Faults[1].At != 500*time.Millisecond {
		t.Errorf("faults = %+v", a.Faults)
	}
	// Unset expectations stay unset in the file's record; the checker
	// applies the defaults (so a stored history is judged the same way).
	if a.Expect.Violations != nil || !*s.Cases[2].Expect.Violations {
		t.Errorf("expectations as written: %+v %+v", a.Expect, s.Cases[2].Expect)
	}
	if m := a.Meta(); m.LeaseNs != int64(500*time.Millisecond) || m.OpTimeoutNs != int64(time.Second) {
		t.Errorf("meta: lease %d op timeout %d", m.LeaseNs, m.OpTimeoutNs)
	}
	if servers := a.Backend.Servers(); len(servers) != 1 || servers[0].Persistence != "everysec" {
		t.Errorf("servers = %+v", servers)
	}
}

// TestParseBad covers every kind of bad input: each must be rejected with a
// message that names the file, the field and the problem.
func TestParseBad(t *testing.T) {
	base := func(caseBody string) string {
		return "name: t\nworkload: {duration: 2s}\ncases:\n  - name: c\n" + caseBody
	}
	tests := []struct {
		name string
		src  string
		want []string
	}{
		{"syntax error", "name: t\ncases: [\n", []string{"bad.yaml:2:"}},
		{"not a mapping", "- a\n- b\n", []string{"bad.yaml:1:", "want a mapping"}},
		{"unknown top-level field", "name: t\nseeed: 3\ncases: [{name: c, backend: local}]\n", []string{"bad.yaml:2:", "seeed"}},
		{"no name", "cases: [{name: c, backend: local}]\n", []string{"name: missing"}},
		{"no cases", "name: t\n", []string{"no cases"}},
		{"unknown backend", base("    backend: zookeper\n"), []string{"cases[0] (c).backend", `unknown backend "zookeper"`, "known: consul, driver, etcd, etcd-txn, local"}},
		{"missing backend", base("    faults: []\n"), []string{"cases[0] (c).backend: missing"}},
		{"unknown backend option", base("    backend: redis\n    options: {persistance: none}\n"), []string{"bad.yaml:6:", "cases[0] (c).options", "persistance"}},
		{"bad backend option value", base("    backend: redis\n    options: {persistence: sometimes}\n"), []string{"persistence", "sometimes"}},
		{"unknown workload field", base("    backend: local\n    workload: {clinets: 3}\n"), []string{"cases[0] (c).workload", "clinets"}},
		{"zero duration", "name: t\nworkload: {duration: 0s}\ncases: [{name: c, backend: local}]\n", []string{"duration: must be a positive duration"}},
		{"negative ttl", base("    backend: local\n    workload: {ttl: -1s}\n"), []string{"ttl: must be a positive duration"}},
		{"bad duration text", base("    backend: local\n    workload: {ttl: soon}\n"), []string{`"soon" is not a duration`}},
		{"override of a missing instance", base("    backend: local\n    workload: {instances: 2, overrides: [{instances: [3], hold: {min: 1ms, max: 2ms}}]}\n"), []string{"workload.overrides[0].instances", "instance 3 is outside 1..2"}},
		{"override of nothing", base("    backend: local\n    workload: {overrides: [{instances: [1]}]}\n"), []string{"workload.overrides[0]", "overrides nothing"}},
		{"override with a bad hold", base("    backend: local\n    workload: {overrides: [{instances: [1], hold: {min: 5ms, max: 1ms}}]}\n"), []string{"workload.overrides[0].hold"}},
		{"zero instances", base("    backend: local\n    workload: {instances: 0}\n"), []string{"instances: 0 is outside"}},
		{"bad key pick", base("    backend: local\n    workload: {keys: {count: 2, pick: random}}\n"), []string{"keys.pick"}},
		{"bad fencing check", base("    backend: local\n    workload: {fencing_check: bigger}\n"), []string{"workload.fencing_check", "not one of at-least, greater, not-equal"}},
		{"fencing check without a resource", base("    backend: local\n    workload: {fencing_check: not-equal, resource: false}\n"), []string{"workload.fencing_check", "no resource"}},
		{"bad distribution", base("    backend: local\n    workload: {hold: {min: 10ms, max: 1ms}}\n"), []string{"hold: need 0 <= min <= max"}},
		{"unknown fault type", base("    backend: local\n    faults: [{type: meteor, target: instance-1, at: 1s, for: 1s}]\n"), []string{"faults[0].type", `unknown fault type "meteor"`}},
		{"unknown fault option", base("    backend: redis\n    faults: [{type: latency, target: link:redis-1, at: 0s, for: 1s, latency: 5ms, jiter: 1ms}]\n"), []string{"faults[0]", "jiter"}},
		{"missing target", base("    backend: local\n    faults: [{type: pause, at: 1s, for: 500ms}]\n"), []string{"faults[0].target: missing"}},
		{"target does not exist", base("    backend: redis\n    faults: [{type: kill, target: redis-3, at: 1s, for: 500ms}]\n"), []string{`"redis-3" does not exist`, "redis-1"}},
		{"instance does not exist", base("    backend: local\n    faults: [{type: pause, target: instance-9, at: 1s, for: 500ms}]\n"), []string{`"instance-9" does not exist`}},
		{"per-instance link of a missing instance", base("    backend: redis\n    faults: [{type: partition, target: link:redis-1@instance-3, at: 1s, for: 500ms}]\n"), []string{`"link:redis-1@instance-3" does not exist`}},
		{"wrong target kind", base("    backend: redis\n    faults: [{type: latency, target: redis-1, at: 0s, for: 1s, latency: 5ms}]\n"), []string{"latency cannot act on server"}},
		{"role on a link fault", base("    backend: redis\n    faults: [{type: partition, target: holder, at: 0s, for: 1s}]\n"), []string{`cannot target the "holder" role`}},
		{"leader without a leader", base("    backend: redis\n    faults: [{type: kill, target: leader, at: 0s, for: 1s}]\n"), []string{`role "leader" cannot be resolved`}},
		{"master outside sentinel", base("    backend: etcd\n    faults: [{type: kill, target: master, at: 0s, for: 1s}]\n"), []string{`role "master" cannot be resolved`}},
		{"address partition on zookeeper", base("    backend: zookeeper\n    faults: [{type: isolate, target: zookeeper-1, at: 0s, for: 1s}]\n"), []string{"zookeeper servers do not use their own address"}},
		{"pattern that matches nothing", base("    backend: etcd\n    faults: [{type: drop, target: link:redis-*@instance-1, at: 0s, for: 1s}]\n"), []string{"bad.yaml:6:", `"link:redis-*@instance-1" matches no target`}},
		{"role in a set", base("    backend: etcd\n    faults: [{type: pause, target: [holder, instance-2], at: 0s, for: 1s}]\n"), []string{"not roles"}},
		{"set of two kinds", base("    backend: etcd\n    faults: [{type: pause, target: [etcd-1, instance-2], at: 0s, for: 1s}]\n"), []string{"must be of one kind"}},
		{"set member that does not exist", base("    backend: etcd\n    faults: [{type: drop, target: [link:etcd-1@instance-1, link:etcd-9@instance-1], at: 0s, for: 1s}]\n"), []string{`"link:etcd-9@instance-1" does not exist`}},
		{"split with a missing member", base("    backend: consul\n    faults: [{type: split, target: consul-1, group: [consul-9], at: 0s, for: 1s}]\n"), []string{`"consul-9" does not exist`}},
		{"holder of a missing key", base("    backend: redis\n    faults: [{type: pause, target: holder-of:k3, at: 0s, for: 1s}]\n"), []string{`"holder-of:k3" names no key`}},
		{"pause longer than the run", base("    backend: local\n    faults: [{type: pause, target: instance-1, at: 1s, for: 5s}]\n"), []string{"ends after the case's duration 2s"}},
		{"zero fault window", base("    backend: local\n    faults: [{type: pause, target: instance-1, at: 1s, for: 0s}]\n"), []string{"for: must be a positive duration"}},
		{"overlapping faults on one target", base("    backend: local\n    faults:\n      - {type: pause, target: instance-1, at: 0s, for: 1s}\n      - {type: kill, target: instance-1, at: 500ms}\n"), []string{"pause-1 and kill-2 overlap on target instance-1"}},
		{"a role may be the target it overlaps", base("    backend: local\n    faults:\n      - {type: pause, target: holder, at: 0s, for: 1s}\n      - {type: kill, target: instance-2, at: 500ms}\n"), []string{"pause-1 and kill-2 overlap on target holder (as instance-2)", "process"}},
		{"two latencies on one link", base("    backend: redis\n    faults:\n      - {type: latency, latency: 5ms, target: link:redis-1, at: 0s, for: 1s}\n      - {type: latency, latency: 9ms, target: link:redis-1, at: 500ms, for: 1s}\n"), []string{"latency-1 and latency-2 overlap on target link:redis-1"}},
		{"memory pressure on a killed server", base("    backend: redis\n    options: {maxmemory: 4mb, maxmemory_policy: volatile-lru}\n    faults:\n      - {type: memory-pressure, target: redis-1, at: 0s, for: 1s}\n      - {type: kill, target: redis-1, at: 500ms, for: 100ms}\n"), []string{"overlap on target redis-1", "process"}},
		{"duplicate case", "name: t\ncases: [{name: c, backend: local}, {name: c, backend: local}]\n", []string{`"c" is used twice`}},
		{"bad expectation field", base("    backend: local\n    expect: {violation: true}\n"), []string{"violation"}},
		{"any for a bound", base("    backend: local\n    expect: {max_gap: any}\n"), []string{"bad.yaml:6:", "max_gap: any is only for an outcome"}},
		{"any beside measure", base("    backend: local\n    expect: {measure: true, violations: any}\n"), []string{"expect.measure", "leave out any"}},
		{"any misspelt", base("    backend: local\n    expect: {violations: anything}\n"), []string{"violations: want true, false or any, not \"anything\""}},
		{"max_overlap beside no violations", base("    backend: local\n    expect: {max_overlap: 1s}\n"), []string{"bad.yaml:6:", "expect.max_overlap", "say violations: true or any"}},
		{"max_overlap beside measure", base("    backend: local\n    expect: {measure: true, max_overlap: 1s}\n"), []string{"expect.measure", "max_overlap"}},
		{"late releases misspelt", base("    backend: local\n    expect: {late_releases_accepted: sometimes}\n"), []string{"late_releases_accepted: want true, false or any"}},
		{"unknown field after comments", "name: t\n# a comment\n\ncases:\n  - name: c\n    # more\n\n    backend: local\n    workload:\n      # and more\n      clinets: 2\n", []string{"bad.yaml:11:", "clinets"}},
		{"top-level workload error reported once, where written", "name: t\nworkload:\n  ttl: -1s\ncases: [{name: a, backend: local}, {name: b, backend: local}]\n", []string{"bad.yaml:3: workload.ttl"}},
		{"fault window that overflows", base("    backend: local\n    faults: [{type: pause, target: instance-1, at: 1h, for: 100h}]\n"), []string{"for: must be a positive duration of at most 24h"}},
		{"a 292-year duration", base("    backend: local\n    workload: {ttl: 2562047h}\n"), []string{"bad.yaml:", "\"2562047h\" is longer than any duration lockbench takes"}},
		{"a rate of 1e18", base("    backend: local\n    workload: {duration: 2s, rate: {per_second: 1e18}}\n"), []string{"workload.rate", "more than lockbench paces"}},
		{"more than 10M operations", base("    backend: local\n    workload: {duration: 101s, rate: {per_second: 100000}}\n"), []string{"workload.rate", "plans 1.01e+07 operations", "at most 10000000 a case"}},
		{"10M operations at a ramp's peak", base("    backend: local\n    workload: {duration: 200s, rate: {from: 10, to: 60000}}\n"), []string{"workload.rate", "60000 per second for 3m20s plans 1.2e+07 operations"}},
		{"a case name with a terminal escape", "name: t\nworkload: {duration: 2s}\ncases:\n  - name: \"c\\e]0;pwned\\a\\nx\"\n    backend: local\n", []string{"a case name is at most 100 letters", `"c\x1b]0;pwned\a\nx"`}},
		{"case too long", base("    backend: local\n    workload: {duration: 25h}\n"), []string{"workload.duration", "longer than"}},
		{"nemesis too dense", "name: t\nworkload: {duration: 2s}\ncases:\n  - name: c\n    backend: local\n    nemesis: {every: {min: 1us, max: 1us}, for: {min: 1us, max: 1us}, faults: [{type: pause, target: instance-1}]}\n", []string{"bad.yaml:6:", "nemesis.every"}},
		{"nemesis that draws too many faults", "name: t\nworkload: {duration: 1h}\ncases:\n  - name: c\n    backend: local\n    nemesis: {every: {min: 10ms, max: 10ms}, for: {min: 1ms, max: 1ms}, faults: [{type: pause, target: instance-1}]}\n", []string{"bad.yaml:6:", "draws more than 1000 faults"}},
		{"executor without jobs", base("    backend: local\n    faults: [{type: pause, target: executor@before-effect, at: 0s, for: 1s}]\n"), []string{"bad.yaml:6:", "runs no jobs"}},
		{"executor at no phase of a job", "name: t\nworkload: {duration: 2s, resource: false, jobs: {count: 4, every: 10ms, grace: 1s}}\ncases:\n  - name: c\n    strategy: skip-locked\n    faults: [{type: pause, target: executor@lunch, at: 0s, for: 1s}]\n", []string{"bad.yaml:6:", `no phase "lunch"`}},
		{"a link scoped to a phase", "name: t\nworkload: {duration: 2s, resource: false, jobs: {count: 4, every: 10ms, grace: 1s}}\ncases:\n  - name: c\n    strategy: skip-locked\n    faults: [{type: partition, target: link:postgres-1@executor@after-effect, at: 0s, for: 1s}]\n", []string{"bad.yaml:6:", "scoped to the executor, not to a phase"}},
		{"link nobody uses", base("    backend: consul\n    workload: {instances: 2}\n    faults: [{type: partition, target: link:consul-2@instance-1, at: 0s, for: 1s}]\n"), []string{`"link:consul-2@instance-1" does not exist in this case's cluster, or no instance uses it`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("bad.yaml", []byte(tt.src))
			if err == nil {
				t.Fatal("accepted; want an error")
			}
			if !IsConfigError(err) {
				t.Errorf("error %v is not a config error", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not mention %q:\n%v", w, err)
				}
			}
			// Every problem names the file and the line.
			for _, line := range err.(*Errors).List {
				if !located.MatchString(line) {
					t.Errorf("problem without file:line: %q", line)
				}
			}
		})
	}
}

var located = regexp.MustCompile(`^bad\.yaml:\d+: `)

// TestShippedScenariosParse keeps every scenario file in the repository valid.
func TestShippedScenariosParse(t *testing.T) {
	files, err := filepath.Glob("../../scenarios/*.yaml")
	known, _ := filepath.Glob("../../scenarios/known/*.yaml")
	usecases, _ := filepath.Glob("../../scenarios/usecases/*.yaml")
	known = append(known, usecases...)
	files = append(files, known...)
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenario files found: %v", err)
	}
	for _, f := range files {
		if _, err := Load(f); err != nil {
			t.Errorf("%v", err)
		}
	}
}

// TestExpectAny keeps an outcome written "any" out of the judged
// expectation and out of its defaults, beside outcomes that are judged.
func TestExpectAny(t *testing.T) {
	src := "name: t\nworkload: {duration: 2s}\ncases:\n  - name: c\n    backend: local\n    faults: [{type: kill, target: instance-1, at: 1s}]\n    expect: {violations: any, available: any, lost_updates: false}\n"
	s, err := Parse("any.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	e := s.Cases[0].Expect
	if e.Violations != nil || e.Available != nil || e.LostUpdates == nil || *e.LostUpdates {
		t.Fatalf("expect = %+v", e)
	}
	if !e.IsAny("violations") || !e.IsAny("available") || e.IsAny("lost_updates") {
		t.Errorf("any = %v", e.Any)
	}
	d := e.WithDefaults(true, true)
	if d.Violations != nil || d.Available != nil || d.StaleAccepted == nil {
		t.Errorf("defaults over any: %+v", d)
	}
	if err := s.Cases[0].Meta().Validate(); err != nil {
		t.Errorf("meta: %v", err)
	}
}

// TestExpectWhatTellsClientsApart reads the expectations on late calls,
// linearizability and the longest overlap into the case's meta.
func TestExpectWhatTellsClientsApart(t *testing.T) {
	src := "name: t\nworkload: {duration: 2s}\ncases:\n  - name: c\n    backend: local\n    expect: {violations: true, late_releases_accepted: false, late_extensions_accepted: any, linearizable: true, max_overlap: 400ms}\n"
	s, err := Parse("late.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	e := s.Cases[0].Meta().Expect
	if e.LateReleasesAccepted == nil || *e.LateReleasesAccepted || e.Linearizable == nil || !*e.Linearizable ||
		e.MaxOverlapNs != int64(400*time.Millisecond) || !e.IsAny("late_extensions_accepted") || e.LateExtensionsAccepted != nil {
		t.Errorf("expect = %+v", e)
	}
	if err := s.Cases[0].Meta().Validate(); err != nil {
		t.Errorf("meta: %v", err)
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "nope.yaml"))
	if err == nil || IsConfigError(err) || !os.IsNotExist(unwrapAll(err)) {
		t.Errorf("err = %v", err)
	}
}

func unwrapAll(err error) error {
	for {
		u, ok := err.(interface{ Unwrap() error })
		if !ok {
			return err
		}
		err = u.Unwrap()
	}
}

func TestTrialsExpand(t *testing.T) {
	s, err := Parse("t.yaml", []byte("name: t\ncases:\n  - {name: r1, backend: local, trials: {count: 3, need: 2}, expect: {violations: true}}\n  - {name: r2, backend: local}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Cases) != 4 {
		t.Fatalf("cases = %d, want 4", len(s.Cases))
	}
	for i, want := range []string{"r1.t1", "r1.t2", "r1.t3", "r2"} {
		c := s.Cases[i]
		if c.Name != want {
			t.Errorf("case %d = %s, want %s", i, c.Name, want)
		}
		if i < 3 && (c.Row != "r1" || c.Trial != i+1 || c.Trials != 3 || c.Need != 2) {
			t.Errorf("trial %d = %+v", i, c)
		}
	}
	for _, bad := range []string{"{count: 0}", "{count: 2, need: 3}", "{count: 101}"} {
		if _, err := Parse("t.yaml", []byte("name: t\ncases: [{name: r, backend: local, trials: "+bad+"}]\n")); err == nil || !strings.Contains(err.Error(), "trials") {
			t.Errorf("trials %s: %v", bad, err)
		}
	}
}

const nemesisScenario = `
name: n
seed: 5
workload: {duration: 30s}
cases:
  - name: a
    backend: redis
    faults: [{type: kill, target: redis-1, at: 500ms, for: 100ms}]
    nemesis:
      start: 1s
      every: {min: 2s, max: 5s}
      for: {min: 1s, max: 3s}
      faults:
        - {type: pause, target: holder}
        - {type: latency, target: link:redis-1, latency: 20ms}
        - {type: partition, target: link:resource}
`

func schedule(c *Case) string {
	var b strings.Builder
	for _, f := range c.Faults {
		fmt.Fprintf(&b, "%s %s %s %s %s; ", f.Name, f.Type, f.Target(), f.At, f.For)
	}
	return b.String()
}

// TestNemesisSchedule: the same seed gives the same schedule, another seed
// another one; windows stay inside the run and never overlap.
func TestNemesisSchedule(t *testing.T) {
	s1, err := Parse("n.yaml", []byte(nemesisScenario))
	if err != nil {
		t.Fatal(err)
	}
	s2, _ := Parse("n.yaml", []byte(nemesisScenario))
	a, b := schedule(s1.Cases[0]), schedule(s2.Cases[0])
	if a != b {
		t.Fatalf("same seed, different schedules:\n%s\n%s", a, b)
	}
	c := s1.Cases[0]
	if len(c.Faults) < 5 || c.Faults[0].Name != "kill-1" {
		t.Fatalf("schedule too short or fixed fault lost: %s", a)
	}
	var prevEnd time.Duration
	for _, f := range c.Faults[1:] {
		if f.At < prevEnd || f.At+f.For >= 30*time.Second || f.For < time.Second || f.For > 3*time.Second {
			t.Errorf("bad window %s at %s for %s (previous ended %s)", f.Name, f.At, f.For, prevEnd)
		}
		prevEnd = f.At + f.For
	}
	if err := s2.Reseed(6); err != nil {
		t.Fatal(err)
	}
	if schedule(s2.Cases[0]) == a {
		t.Errorf("seeds 5 and 6 drew the same schedule: %s", a)
	}
	if err := s2.Reseed(5); err != nil || schedule(s2.Cases[0]) != a {
		t.Errorf("reseeding with 5 did not replay the schedule: %v", err)
	}
}

func TestNemesisBadInput(t *testing.T) {
	for _, tt := range []struct{ nem, want string }{
		{"{every: {min: 1s, max: 2s}, for: {min: 1s, max: 1s}, faults: []}", "no faults"},
		{"{every: {min: 0s, max: 2s}, for: {min: 1s, max: 1s}, faults: [{type: pause, target: holder}]}", "every"},
		{"{every: {min: 1s, max: 2s}, for: {min: 1s, max: 1s}, faults: [{type: pause, target: redis-7}]}", `"redis-7" does not exist`},
	} {
		_, err := Parse("n.yaml", []byte("name: n\ncases: [{name: a, backend: redis, nemesis: "+tt.nem+"}]\n"))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("nemesis %s: %v, want %q", tt.nem, err, tt.want)
		}
	}
}

func TestThresholdsValidated(t *testing.T) {
	s, err := Parse("t.yaml", []byte("name: t\nthresholds: [\"violations == 0\"]\ncases:\n  - {name: a, backend: local, thresholds: [\"acquire_p99 < 50ms\"]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Cases[0].Thresholds; len(got) != 2 || got[1] != "acquire_p99 < 50ms" {
		t.Errorf("thresholds = %v", got)
	}
	_, err = Parse("t.yaml", []byte("name: t\ncases:\n  - {name: a, backend: local, thresholds: [\"acquire_p99 < 50\", \"throughput > 5 per second\"]}\n"))
	if err == nil || !strings.Contains(err.Error(), "give a unit") || !strings.Contains(err.Error(), "write it as N/s") {
		t.Errorf("bad thresholds: %v", err)
	}
}

// TestFaultTargetSets: a pattern or a list names a set of concrete
// targets, expanded once and recorded in the meta; a fault_group is kept.
func TestFaultTargetSets(t *testing.T) {
	src := `name: t
workload: {duration: 3s, instances: 2}
cases:
  - name: c
    backend: etcd
    faults:
      - {type: drop, target: "link:etcd-*@instance-1", at: 1s, for: 1s}
      - {type: latency, latency: 10ms, target: [link:etcd-2@instance-2, link:etcd-1@instance-2], at: 1s, for: 1s, fault_group: out}
`
	s, err := Parse("sets.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	fs := s.Cases[0].Faults
	if got := strings.ReplaceAll(fs[0].Target(), ",", " "); got != "link:etcd-1@instance-1 link:etcd-2@instance-1 link:etcd-3@instance-1" {
		t.Errorf("pattern expanded to %q", got)
	}
	if fs[1].Target() != "link:etcd-2@instance-2,link:etcd-1@instance-2" || fs[1].Group != "out" {
		t.Errorf("list: target %q group %q", fs[1].Target(), fs[1].Group)
	}
	m := s.Cases[0].Meta()
	if m.Faults[0].Target != fs[0].Target() || m.Faults[1].Group != "out" {
		t.Errorf("meta: %+v", m.Faults)
	}
	// Links scoped to an instance role keep the role, resolved at the
	// fault, once for every link.
	role := strings.Replace(src, "link:etcd-*@instance-1", "link:etcd-*@holder", 1)
	s, err = Parse("role.yaml", []byte(role))
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Cases[0].Faults[0].Target(); got != "link:etcd-1@holder,link:etcd-2@holder,link:etcd-3@holder" {
		t.Errorf("role-scoped pattern expanded to %q", got)
	}
	if _, err := Parse("bad.yaml", []byte(strings.Replace(src, "link:etcd-*@instance-1", "link:redis-*@holder", 1))); err == nil || !strings.Contains(err.Error(), `"link:redis-*@holder" matches no target`) {
		t.Errorf("role-scoped pattern matching nothing: %v", err)
	}
}

// TestSweeps: {sweep: [...]} and {ttl_x: [...]} expand a case into points,
// each named after its values and recorded in its meta; ttl_x durations
// are multiples of the case's TTL; trials apply per point; bad sweeps are
// errors with their line.
func TestSweeps(t *testing.T) {
	src := `name: t
workload: {duration: 10s, ttl: 2s, instances: 2}
cases:
  - name: pause
    backend: redis
    trials: {count: 2, need: 1}
    workload: {clients: {sweep: [1, 4], name: clients}}
    faults: [{type: pause, target: holder, at: 1s, for: {ttl_x: [0.5, 2]}}]
`
	s, err := Parse("sweep.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Cases) != 8 {
		t.Fatalf("%d cases, want 2 × 2 points × 2 trials", len(s.Cases))
	}
	c := s.Cases[2] // clients=1, for=2×lease, trial 1
	if c.Name != "pause[clients=1,for=2×lease].t1" || c.Row != "pause[clients=1,for=2×lease]" || c.Workload.Clients != 1 || c.Faults[0].For != 4*time.Second {
		t.Errorf("point: %s row %s clients %d for %s", c.Name, c.Row, c.Workload.Clients, c.Faults[0].For)
	}
	m := c.Meta()
	if m.Sweep == nil || m.Sweep.Case != "pause" || m.Sweep.X[0] != 1 || m.Sweep.X[1] != 2 || m.Sweep.Values[1] != "2×lease" {
		t.Errorf("meta sweep: %+v", m.Sweep)
	}
	for _, bad := range []struct{ body, want string }{
		{"    faults: [{type: pause, target: holder, at: 1s, for: {ttl_x: [0.5]}}]\n", "at least two values"},
		{"    faults: [{type: pause, target: holder, at: 1s, for: {ttl_x: [0.5, -1]}}]\n", "not a positive multiple"},
		{"    workload: {clients: {sweep: [1, 2]}, instances: {sweep: [1, 2]}, keys: {count: {sweep: [1, 2]}}}\n", "at most 2"},
		{"    faults: [{type: pause, target: holder, at: 1s, for: {sweep: [1s, 2s], every: 3}}]\n", "not \"every\""},
	} {
		_, err := Parse("bad.yaml", []byte("name: t\nworkload: {duration: 10s}\ncases:\n  - name: c\n    backend: redis\n"+bad.body))
		if err == nil || !strings.Contains(err.Error(), bad.want) || !strings.Contains(err.Error(), "bad.yaml:") {
			t.Errorf("%q: %v, want %q", bad.body, err, bad.want)
		}
	}
}

// TestSideBySide: trials run side by side become batches; each lane has
// its own instances, keys and copies of the faults; a fault every lane
// would share is refused.
func TestSideBySide(t *testing.T) {
	src := `name: t
workload: {duration: 5s, instances: 2, keys: {count: 1}}
cases:
  - name: p
    backend: redis
    trials: {count: 5, need: 1, side_by_side: 3}
    faults:
      - {type: pause, target: holder, at: 1s, for: 2s}
      - {type: drop, target: link:redis-1@instance-2, at: 1s, for: 2s}
`
	s, err := Parse("sbs.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Cases) != 2 || s.Cases[0].Name != "p.t1-3" || s.Cases[1].Name != "p.t4-5" || s.Cases[1].Lanes != 2 || s.Cases[1].Trial != 4 {
		t.Fatalf("batches: %s (%d lanes), %s (%d lanes, first trial %d)", s.Cases[0].Name, s.Cases[0].Lanes, s.Cases[1].Name, s.Cases[1].Lanes, s.Cases[1].Trial)
	}
	b := s.Cases[0]
	if b.Workload.Instances != 6 || len(b.Faults) != 6 {
		t.Fatalf("instances %d, faults %d", b.Workload.Instances, len(b.Faults))
	}
	if f := b.Faults[4]; f.Name != "pause-1@l3" || f.Lane != 3 || f.Target() != "holder" {
		t.Errorf("lane 3's pause: %+v", f)
	}
	if f := b.Faults[5]; f.Name != "drop-2@l3" || f.Target() != "link:redis-1@instance-6" {
		t.Errorf("lane 3's drop: %+v", f)
	}
	m := b.Meta()
	if m.Lanes != 3 || m.LaneInstances != 2 || m.Trials != 5 {
		t.Errorf("meta: %+v", m)
	}
	// A fault on a server the lanes share happens once: every lane meets it.
	shared := strings.Replace(src, "link:redis-1@instance-2", "redis-1", 1)
	shared = strings.Replace(shared, "type: drop", "type: pause", 1)
	ss, err := Parse("shared.yaml", []byte(shared))
	if err != nil {
		t.Fatalf("a server fault side by side: %v", err)
	}
	sb := ss.Cases[0]
	if len(sb.Faults) != 4 || sb.Faults[0].Name != "pause-2" || sb.Faults[0].Lane != 0 || sb.Faults[0].Target() != "redis-1" {
		t.Errorf("shared fault: %d faults, first %+v", len(sb.Faults), sb.Faults[0])
	}
	mixed := strings.Replace(src, "link:redis-1@instance-2", "[link:redis-1@instance-2, link:redis-1]", 1)
	if _, err := Parse("bad.yaml", []byte(mixed)); err == nil || !strings.Contains(err.Error(), "split it in two") {
		t.Errorf("a fault on both a lane's own link and a shared server: %v", err)
	}
}

// TestSweepsInStep: two sweeps of one name are one axis, in step.
func TestSweepsInStep(t *testing.T) {
	src := `name: t
workload: {duration: {sweep: [4s, 9s], name: pause}, ttl: 1s, instances: 2}
cases:
  - name: p
    backend: redis
    faults: [{type: pause, target: holder, at: 500ms, for: {ttl_x: [1, 5], name: pause}}]
`
	s, err := Parse("step.yaml", []byte(src))
	if err == nil {
		t.Fatalf("a sweep in the scenario's workload (not a case's) must be refused or expanded, got %d cases", len(s.Cases))
	}
	src = strings.Replace(src, "workload: {duration: {sweep: [4s, 9s], name: pause}, ttl: 1s, instances: 2}", "workload: {ttl: 1s, instances: 2}", 1)
	src = strings.Replace(src, "    backend: redis\n", "    backend: redis\n    workload: {duration: {sweep: [4s, 9s], name: pause}}\n", 1)
	if s, err = Parse("step.yaml", []byte(src)); err != nil {
		t.Fatal(err)
	}
	if len(s.Cases) != 2 || s.Cases[1].Workload.Duration.D() != 9*time.Second || s.Cases[1].Faults[0].For != 5*time.Second || s.Cases[1].Name != "p[pause=5×lease]" {
		t.Fatalf("in step: %d cases; %s: duration %s, for %s", len(s.Cases), s.Cases[1].Name, s.Cases[1].Workload.Duration, s.Cases[1].Faults[0].For)
	}
}

// TestRequirementsComeFromTheFault: validation asks the machine (through
// cluster.Probe) for exactly what each fault declares in Info.Requires,
// no more: on a machine with nothing, every fault that requires something
// is refused with the probe's reason, and every fault that requires
// nothing is accepted; on a machine with everything, all are accepted.
// Each fault is tried in the example use its registration carries.
func TestRequirementsComeFromTheFault(t *testing.T) {
	src := func(info faults.Info) []byte {
		u := info.Example
		opts := ""
		if u.Options != "" {
			opts = "\n    options: " + u.Options
		}
		network := ""
		if u.Network != "" {
			network = "network: " + u.Network + "\n"
		}
		fault := strings.Replace(u.Fault, "}", ", at: 1s, for: 1s}", 1)
		return []byte(fmt.Sprintf("name: t\n%sworkload: {duration: 3s, instances: 2}\ncases:\n  - name: c\n    backend: %s%s\n    faults:\n      - %s\n", network, u.Backend, opts, fault))
	}
	saved := cluster.Probe
	defer func() { cluster.Probe = saved }()
	none := errors.New("not on this machine")
	for _, info := range faults.All() {
		if info.Example.Backend == "" || info.Example.Fault == "" {
			t.Errorf("fault %s: its registration has no Example (faults.Info.Example: a backend and a use of the fault, as a scenario writes it)", info.Name)
			continue
		}
		cluster.Probe.Firewall = func() error { return nil }
		cluster.Probe.Hosts = cluster.Probe.Firewall
		cluster.Probe.Netem = cluster.Probe.Firewall
		cluster.Probe.Faketime = cluster.Probe.Firewall
		cluster.Probe.Fuse = cluster.Probe.Firewall
		cluster.Probe.Cgroups = func(string) error { return nil }
		if _, err := Parse(info.Name+".yaml", src(info)); err != nil {
			t.Errorf("%s on a machine with everything: %v", info.Name, err)
			continue
		}
		// A machine with nothing: the hosts network itself is refused,
		// so netem is judged on its own requirement alone.
		cluster.Probe.Netem = func() error { return none }
		cluster.Probe.Faketime = cluster.Probe.Netem
		cluster.Probe.Firewall = cluster.Probe.Netem
		cluster.Probe.Fuse = cluster.Probe.Netem
		cluster.Probe.Cgroups = func(string) error { return none }
		if info.Name != "netem" {
			cluster.Probe.Hosts = cluster.Probe.Netem
		}
		_, err := Parse(info.Name+".yaml", src(info))
		switch needs := len(info.Requires()) > 0; {
		case needs && (err == nil || !strings.Contains(err.Error(), none.Error())):
			t.Errorf("%s requires %v but a machine without them gives: %v", info.Name, info.Requires(), err)
		case !needs && err != nil:
			t.Errorf("%s requires nothing but a machine with nothing refuses it: %v", info.Name, err)
		}
	}
}

// TestCompatibleFaultsOverlap: faults that take over different things of
// one target may overlap there (faults.Info.Claims).
func TestCompatibleFaultsOverlap(t *testing.T) {
	saved := cluster.Probe
	defer func() { cluster.Probe = saved }()
	ok := func() error { return nil }
	cluster.Probe.Firewall, cluster.Probe.Hosts, cluster.Probe.Netem, cluster.Probe.Faketime, cluster.Probe.Fuse = ok, ok, ok, ok, ok
	cluster.Probe.Cgroups = func(string) error { return nil }
	for name, faultsYAML := range map[string]string{
		"a kill inside a disk stall":    "      - {type: disk-stall, target: redis-1, at: 0s, for: 2s}\n      - {type: kill, target: redis-1, at: 500ms, for: 200ms}\n",
		"latency and a bandwidth limit": "      - {type: latency, latency: 5ms, target: link:redis-1, at: 0s, for: 2s}\n      - {type: bandwidth, rate: 10, target: link:redis-1, at: 500ms, for: 1s}\n",
		"a pause during CPU starvation": "      - {type: cpu-starve, target: instance-1, at: 0s, for: 2s}\n      - {type: pause, target: holder, at: 500ms, for: 1s}\n",
		"a power loss on a full disk":   "      - {type: disk-full, target: redis-1, at: 0s, for: 2s}\n      - {type: power-loss, target: redis-1, at: 500ms, for: 200ms}\n",
	} {
		src := "name: t\nworkload: {duration: 3s, instances: 2}\ncases:\n  - name: c\n    backend: redis\n    options: {persistence: everysec}\n    faults:\n" + faultsYAML
		if _, err := Parse("ok.yaml", []byte(src)); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestConnectedMember: the connected-member role is accepted only for
// backends whose instances talk to one member at a time, scoped to an
// instance or an instance role, and in a cut's from list only for an
// instance target.
func TestConnectedMember(t *testing.T) {
	doc := func(backend, fault string) string {
		return "name: t\nworkload: {duration: 3s, instances: 2}\ncases:\n  - name: c\n    backend: " + backend + "\n    faults:\n      - " + fault + "\n"
	}
	for _, tt := range []struct {
		backend, fault string
		want           string // "" valid, else part of the error
	}{
		{"zookeeper", "{type: pause, target: connected-member@holder, at: 1s, for: 1s}", ""},
		{"zookeeper", "{type: kill, target: connected-member@instance-2, at: 1s, for: 1s}", ""},
		{"consul", "{type: pause, target: connected-member@instance-1, at: 1s, for: 1s}", ""},
		{"{backend: etcd, options: {balancer: pick-first}}", "{type: pause, target: connected-member@holder, at: 1s, for: 1s}", ""},
		{"etcd", "{type: pause, target: connected-member@holder, at: 1s, for: 1s}", "do not talk to one member at a time"},
		{"redis", "{type: pause, target: connected-member@holder, at: 1s, for: 1s}", "do not talk to one member at a time"},
		{"zookeeper", "{type: pause, target: connected-member@instance-3, at: 1s, for: 1s}", `"instance-3" is no instance of this case`},
		{"zookeeper", "{type: pause, target: connected-member@leader, at: 1s, for: 1s}", `"leader" is no instance of this case`},
		{"zookeeper", "{type: pause, target: connected-member@holder-of:k9, at: 1s, for: 1s}", "names no key"},
		{"zookeeper", "{type: isolate, target: holder, from: [connected-member], at: 1s, for: 1s}", ""},
		{"zookeeper", "{type: isolate, target: zookeeper-1, from: [connected-member], at: 1s, for: 1s}", "zookeeper-1 is no instance"},
		{"redis", "{type: one-way, target: instance-1, to: [connected-member], at: 1s, for: 1s}", "do not talk to one member at a time"},
	} {
		src := doc(tt.backend, tt.fault)
		if strings.HasPrefix(tt.backend, "{") {
			src = strings.Replace(src, "    backend: "+tt.backend, "    backend: etcd\n    options: {balancer: pick-first}", 1)
		}
		_, err := Parse("c.yaml", []byte(src))
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s / %s: %v", tt.backend, tt.fault, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%s / %s: error %v, want one saying %q", tt.backend, tt.fault, err, tt.want)
		}
	}
}

// TestControlPlaneFaults: with a targets file, the faults a control plane
// can carry (faults.Info.Remote) are accepted on the servers that have
// one, roles only when every server has one, and refused otherwise.
func TestControlPlaneFaults(t *testing.T) {
	ctl := &control.Section{PidFile: "/run/x.pid", Start: "x"}
	tf := &targets.File{Path: "t.yaml", Servers: map[string]string{"etcd-1": "10.0.0.1:2379", "etcd-2": "10.0.0.2:2379", "etcd-3": "10.0.0.3:2379"},
		Control: map[string]*control.Section{"etcd-1": ctl, "etcd-2": ctl}}
	doc := func(fault string) []byte {
		return []byte("name: t\nworkload: {duration: 3s}\ncases:\n  - name: c\n    backend: etcd\n    faults: [" + fault + "]\n")
	}
	for _, tt := range []struct{ fault, want string }{
		{"{type: pause, target: etcd-1, at: 1s, for: 1s}", ""},
		{"{type: kill, target: etcd-2, at: 1s, for: 1s}", ""},
		{"{type: isolate, target: etcd-1, from: [etcd-2], at: 1s, for: 1s}", ""},
		{"{type: pause, target: etcd-3, at: 1s, for: 1s}", "the targets mode cannot stop and resume servers"},
		{"{type: pause, target: leader, at: 1s, for: 1s}", "the targets mode cannot stop and resume servers"},
		{"{type: power-loss, target: etcd-1, at: 1s, for: 1s}", "the ssh mode cannot cut the power of servers"},
	} {
		_, err := ParseWith("c.yaml", doc(tt.fault), Options{Targets: tf})
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: %v", tt.fault, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%s: %v, want an error saying %q", tt.fault, err, tt.want)
		}
	}
	tf.Control["etcd-3"] = ctl
	if _, err := ParseWith("c.yaml", doc("{type: pause, target: leader, at: 1s, for: 1s}"), Options{Targets: tf}); err != nil {
		t.Errorf("the leader role with every server controlled: %v", err)
	}

	// Through Kubernetes: a server is cut in every protocol at once, and a
	// bench without Kubernetes refuses the file.
	saved := cluster.Probe
	defer func() { cluster.Probe = saved }()
	cluster.Probe.Kubernetes = func() error { return nil }
	cluster.Probe.Firewall = func() error { return nil }
	kc := &control.Section{Kubernetes: &control.Kubernetes{Namespace: "lb", Pod: "p"}, Pattern: "x"}
	kf := &targets.File{Path: "t.yaml", Servers: tf.Servers, Control: map[string]*control.Section{"etcd-1": kc, "etcd-2": kc, "etcd-3": kc}}
	for _, tt := range []struct{ fault, want string }{
		{"{type: isolate, target: etcd-1, at: 1s, for: 1s}", ""},
		{"{type: isolate, target: etcd-1, protocol: udp, at: 1s, for: 1s}", "in every protocol at once"},
		{"{type: isolate, target: instance-1, protocol: udp, at: 1s, for: 1s}", ""},
		{"{type: cpu-starve, target: etcd-1, at: 1s, for: 1s}", "the kubernetes mode cannot cap the CPU of servers"},
	} {
		_, err := ParseWith("c.yaml", doc(tt.fault), Options{Targets: kf})
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("kubernetes %s: %v", tt.fault, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("kubernetes %s: %v, want an error saying %q", tt.fault, err, tt.want)
		}
	}
	delete(kf.Control, "etcd-3")
	if _, err := ParseWith("c.yaml", doc("{type: isolate, target: etcd-1, at: 1s, for: 1s}"), Options{Targets: kf}); err == nil || !strings.Contains(err.Error(), "etcd-3 has no control section") {
		t.Errorf("a Kubernetes cut with a server outside the pods: %v", err)
	}
	if _, err := ParseWith("c.yaml", doc("{type: pause, target: etcd-1, at: 1s, for: 1s}"), Options{Targets: kf}); err != nil {
		t.Errorf("a Kubernetes pause with another server outside the pods: %v", err)
	}
	cluster.Probe.Kubernetes = func() error { return errors.New("built without Kubernetes") }
	if _, err := ParseWith("c.yaml", doc("{type: pause, target: etcd-1, at: 1s, for: 1s}"), Options{Targets: kf}); err == nil || !strings.Contains(err.Error(), "built without Kubernetes") {
		t.Errorf("a bench without Kubernetes: %v", err)
	}
}

// TestTrialsSpreadOverTheCycle: the trials of a row meet their faults at
// points of the lock's own cycle drawn from the seed (etcd: its lease, a
// multiple of its keep-alive and of the lessor's tick), within half the
// slack the case leaves, the same for
// the same seed and different for another; a single case keeps its
// schedule as written.
func TestTrialsSpreadOverTheCycle(t *testing.T) {
	src := `name: t
seed: 5
workload: {duration: 6s, ttl: 3s, instances: 2}
cases:
  - name: p
    backend: etcd
    trials: {count: 8, need: 1, side_by_side: 4}
    faults: [{type: pause, target: holder, at: 1s, for: 2s}]
  - name: one
    backend: etcd
    faults: [{type: pause, target: holder, at: 1s, for: 2s}]
`
	s, err := Parse("spread.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	spreads := map[time.Duration]bool{}
	for _, c := range s.Cases[:2] {
		for _, f := range c.Faults {
			if f.Cycle != 3*time.Second || f.Spread < 0 || f.Spread >= 1500*time.Millisecond || f.At != time.Second+f.Spread {
				t.Errorf("%s %s: at %s, spread %s of a %s cycle", c.Name, f.Name, f.At, f.Spread, f.Cycle)
			}
			spreads[f.Spread] = true
		}
	}
	if len(spreads) < 6 {
		t.Errorf("8 trials met the pause at only %d points of the cycle", len(spreads))
	}
	if f := s.Cases[2].Faults[0]; f.At != time.Second || f.Spread != 0 {
		t.Errorf("a single case's fault moved: %+v", f)
	}
	first := s.Cases[0].Faults[0].Spread
	if err := s.Reseed(5); err != nil || s.Cases[0].Faults[0].Spread != first {
		t.Errorf("the same seed spread differently: %v", err)
	}
	if err := s.Reseed(6); err != nil || s.Cases[0].Faults[0].Spread == first || s.Cases[0].Faults[0].At != time.Second+s.Cases[0].Faults[0].Spread {
		t.Errorf("another seed: spread %s, at %s (%v)", s.Cases[0].Faults[0].Spread, s.Cases[0].Faults[0].At, err)
	}
}

// TestSpreadKeepsASchedule: a trial's faults move by one offset, so they
// keep their places to one another (F1: a cut in force when the kill
// comes), and a fault written at 0 stays in force from the first instant.
func TestSpreadKeepsASchedule(t *testing.T) {
	src := `name: t
seed: 171
workload: {duration: 12s, ttl: 20s, instances: 2, clients: 1}
cases:
  - name: f
    backend: redis-sentinel
    trials: {count: 6, need: 2}
    faults:
      - {type: partition, target: link:redis-1-repl, at: 0s, for: 8s}
      - {type: kill, target: redis-1, at: 1s, for: 6s, failover: true}
      - {type: latency, target: link:redis-2, at: 2s, for: 1s, latency: 5ms}
`
	s, err := Parse("schedule.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	moved := 0
	for _, c := range s.Cases {
		cut, kill, lat := c.Faults[0], c.Faults[1], c.Faults[2]
		if cut.At != 0 || cut.Spread != 0 {
			t.Errorf("%s: the cut written at 0 moved to %s", c.Name, cut.At)
		}
		if kill.Spread != lat.Spread || lat.At-kill.At != time.Second {
			t.Errorf("%s: kill moved %s, latency %s: the schedule came apart", c.Name, kill.Spread, lat.Spread)
		}
		// half the slack the kill leaves: (12s - 1s - 6s) / 2
		if kill.Spread < 0 || kill.Spread >= 2500*time.Millisecond {
			t.Errorf("%s: kill spread %s, beyond half its slack", c.Name, kill.Spread)
		}
		if kill.Spread > 0 {
			moved++
		}
	}
	if moved < 5 {
		t.Errorf("only %d of 6 trials moved their faults", moved)
	}
}

// TestTrialsOwnFaults: a fault written with trial: N belongs to that
// trial alone, side by side (its lane) or one after another; a trial
// number the case does not run, or a shared target's fault given to one
// trial side by side, is refused at its line.
func TestTrialsOwnFaults(t *testing.T) {
	src := `name: t
workload: {duration: 5s, instances: 2}
cases:
  - name: p
    backend: redis
    trials: {count: 3, need: 1, side_by_side: 3, spread: false}
    plan_seed: 77
    faults:
      - {name: a, type: pause, target: holder, at: 1s, for: 2s, trial: 1}
      - {name: b, type: kill, target: holder, at: 1200ms, for: 0s, trial: 2}
      - {name: c, type: latency, target: link:redis-1@holder, latency: 50ms, at: 1s, for: 1s}
`
	s, err := Parse("own.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	b := s.Cases[0]
	var names []string
	for _, f := range b.Faults {
		names = append(names, fmt.Sprintf("%s@%d+%s", f.Name, f.Lane, f.At))
	}
	if got := strings.Join(names, " "); got != "a@l1@1+1s c@l1@1+1s b@l2@2+1.2s c@l2@2+1s c@l3@3+1s" {
		t.Errorf("lanes' faults: %s", got)
	}
	if !b.Fixed || b.PlanSeed != 77 {
		t.Errorf("fixed %v, plan seed %d", b.Fixed, b.PlanSeed)
	}
	if o := b.Faults[1].Options; o["latency"] != "50ms" {
		t.Errorf("options as written: %v", o)
	}
	seq := strings.Replace(src, "side_by_side: 3, ", "", 1)
	s, err = Parse("seq.yaml", []byte(seq))
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Cases) != 3 || len(s.Cases[0].Faults) != 2 || len(s.Cases[1].Faults) != 2 || len(s.Cases[2].Faults) != 1 || s.Cases[1].Faults[0].Name != "b" {
		t.Errorf("one after another: %d cases, faults %d %d %d", len(s.Cases), len(s.Cases[0].Faults), len(s.Cases[1].Faults), len(s.Cases[2].Faults))
	}
	for _, bad := range []struct{ from, to, want string }{
		{"trial: 2}", "trial: 4}", "own.yaml:10: cases[0] (p).faults (b).trial: trial 4: the case runs 3 trials"},
		{"target: holder, at: 1s, for: 2s, trial: 1", "target: redis-1, at: 1s, for: 2s, trial: 1", "every trial of its batch would meet it"},
		{"trial: 1}", "trial: -1}", "must be a trial's number"},
		{"    trials: {count: 3, need: 1, side_by_side: 3, spread: false}\n", "", "the case runs 1 trial"},
	} {
		_, err := Parse("own.yaml", []byte(strings.Replace(src, bad.from, bad.to, 1)))
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s -> %s: %v, want %q", bad.from, bad.to, err, bad.want)
		}
	}
}

// TestSpreadOnlyWhatIsLeftToChance: a trial's offset moves its faults
// when one is aimed at a role, or when the workload is itself random; a
// trial whose faults are all on named targets against a constant hold
// keeps the instants written, saying so; spread: true moves them anyway
// and spread: false keeps everything.
func TestSpreadOnlyWhatIsLeftToChance(t *testing.T) {
	src := `name: t
seed: 5
workload: {duration: 8s, ttl: 2s, instances: 1, clients: 1, hold: {dist: constant, value: 1s}}
cases:
  - name: instant
    backend: redis
    trials: {count: 4, need: 1, side_by_side: 4}
    faults: [{type: latency, target: "link:resource@instance-1", at: 1s, for: 1s, latency: 50ms}]
  - name: role
    backend: redis
    trials: {count: 4, need: 1, side_by_side: 4}
    faults: [{type: pause, target: holder, at: 1s, for: 1s}]
  - name: mixed
    backend: redis
    trials: {count: 4, need: 1}
    faults:
      - {type: pause, target: holder, at: 1s, for: 1s}
      - {type: latency, target: "link:resource@instance-1", at: 1200ms, for: 1s, latency: 50ms}
  - name: random
    backend: redis
    workload: {hold: {dist: uniform, min: 100ms, max: 900ms}}
    trials: {count: 4, need: 1, side_by_side: 4}
    faults: [{type: latency, target: "link:resource@instance-1", at: 1s, for: 1s, latency: 50ms}]
  - name: asked
    backend: redis
    trials: {count: 4, need: 1, side_by_side: 4, spread: true}
    faults: [{type: latency, target: "link:resource@instance-1", at: 1s, for: 1s, latency: 50ms}]
  - name: fixed
    backend: redis
    trials: {count: 4, need: 1, side_by_side: 4, spread: false}
    faults: [{type: pause, target: holder, at: 1s, for: 1s}]
`
	s, err := Parse("policy.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	byBase := map[string][]*Case{}
	for _, c := range s.Cases {
		byBase[c.Row] = append(byBase[c.Row], c)
	}
	moved := func(row string) (n, of int) {
		for _, c := range byBase[row] {
			for _, f := range c.Faults {
				of++
				if f.Spread > 0 {
					n++
				}
			}
		}
		return n, of
	}
	for _, c := range byBase["instant"] {
		for _, f := range c.Faults {
			if f.At != time.Second || f.Spread != 0 || f.Kept != KeptInstant {
				t.Errorf("%s %s: at %s, spread %s, kept %q; want the instant written, kept for its named target", c.Name, f.Name, f.At, f.Spread, f.Kept)
			}
			if n := f.ScheduleNote(time.Duration.String); !strings.Contains(n, "at the time written") {
				t.Errorf("%s: note %q", f.Name, n)
			}
		}
	}
	for _, row := range []string{"role", "random", "asked"} {
		if n, of := moved(row); n < of-1 {
			t.Errorf("%s: %d of %d faults moved, want nearly all", row, n, of)
		}
	}
	for _, c := range byBase["mixed"] {
		pause, lat := c.Faults[0], c.Faults[1]
		if lat.Spread != pause.Spread || lat.At-pause.At != 200*time.Millisecond {
			t.Errorf("%s: the holder's pause moved %s, the named link's latency %s: the schedule came apart", c.Name, pause.Spread, lat.Spread)
		}
	}
	if n, _ := moved("mixed"); n < 6 {
		t.Errorf("mixed: %d of 8 faults moved: a trial with a role-aimed fault moves", n)
	}
	for _, c := range byBase["fixed"] {
		if f := c.Faults[0]; f.At != time.Second || f.Kept != KeptFixed {
			t.Errorf("spread: false: %s at %s, kept %q", f.Name, f.At, f.Kept)
		}
	}
}

// TestRecordsCarryTheEffect: the case meta says what each fault does to
// the processes it hits, from the fault's registration (faults.Info.Effect),
// so the checker reads it as data.
func TestRecordsCarryTheEffect(t *testing.T) {
	src := "name: t\nworkload: {duration: 3s, instances: 2}\ncases:\n  - name: c\n    backend: redis\n    faults:\n" +
		"      - {type: pause, target: instance-1, at: 1s, for: 1s}\n      - {type: kill, target: redis-1, at: 2s, for: 0s}\n      - {type: latency, latency: 5ms, target: link:redis-1, at: 1s, for: 1s}\n"
	s, err := Parse("t.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]history.FaultEffect{}
	for _, f := range s.Cases[0].Meta().Faults {
		got[f.Type] = f.Effect
	}
	if got["pause"] != history.EffectStop || got["kill"] != history.EffectKill || got["latency"] != history.EffectNone {
		t.Errorf("effects on the meta: %v", got)
	}
}
