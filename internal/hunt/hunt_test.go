package hunt

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lockbench/lockbench/history"
	"github.com/lockbench/lockbench/internal/realized"
	"github.com/lockbench/lockbench/internal/scenario"
	"go.yaml.in/yaml/v3"
)

// modelRunner runs scenarios against a model lock instead of servers:
// a trial is unsafe when its holder was paused for at least a lease and
// it has two clients or more; its lock never comes back when its holder
// is killed. It parses every scenario as bench would, so the hunt's
// rendering is checked too.
type modelRunner struct {
	lease time.Duration
	runs  int
	names []string
}

func (m *modelRunner) Run(_ context.Context, name string, src []byte) (*realized.Run, string, error) {
	m.runs++
	m.names = append(m.names, name)
	sc, err := scenario.Parse(name+".yaml", src)
	if err != nil {
		return nil, "", err
	}
	out := &realized.Run{Scenario: sc.Name}
	for _, c := range sc.Cases {
		lanes, inst := max(1, c.Lanes), c.Workload.Instances
		if c.Lanes > 0 {
			inst = c.LaneInstances
		}
		for l := 1; l <= lanes; l++ {
			t := realized.Trial{Case: fmt.Sprintf("%s.t%d", c.Row, c.Trial+l-1), Row: c.Row, Batch: c.Name, Trial: c.Trial + l - 1, Lane: l,
				PlanSeed: uint64(100 + l), DurationNs: int64(c.Workload.Duration.D()), Outcome: realized.Outcome{Status: "ok", Valid: true}}
			for _, f := range c.Faults {
				if f.Lane != 0 && f.Lane != l {
					continue
				}
				target := f.Target()
				if f.Written != "" {
					target = f.Written
				}
				t.Faults = append(t.Faults, realized.Fault{FaultCore: history.FaultCore{Type: f.Type, Target: target}, AtNs: int64(f.At), ForNs: int64(f.For), Applied: true, Phase: realized.PhaseHolding})
				switch {
				case f.Type == "pause" && target == "holder" && f.For >= m.lease && inst*c.Workload.Clients >= 2:
					t.Outcome.Violations++
				case f.Type == "kill" && target == "holder":
					t.Outcome.NeverBack = true
				}
			}
			out.Trials = append(out.Trials, t)
		}
	}
	return out, "runs/" + name, nil
}

// testTemplate is the frame bench hunt builds, for a backend the
// scenario package knows without servers.
func testTemplate(t *testing.T) Template {
	t.Helper()
	src := "name: hunt\nseed: 1\nworkload: {instances: 2, clients: 1, ttl: 2s, hold: {min: 20ms, max: 60ms}}\ncases:\n  - {name: probe, backend: redis-del}\n"
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(src), &doc); err != nil {
		t.Fatal(err)
	}
	sc, err := scenario.Parse("hunt.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return Template{Top: sc.Doc, Case: sc.Cases[0].Source}
}

// fakeClock advances a second each time it is read.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { c.t = c.t.Add(time.Second); return c.t }

func testConfig(t *testing.T, liveness bool) Config {
	s := testSpace()
	s.Kinds = []Weighted{{"pause", 1}, {"kill", 1}, {"cpu-starve", 1}}
	clk := &fakeClock{t: time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)}
	var log strings.Builder
	return Config{Backend: "redis-del", Template: testTemplate(t), Space: s, Base: Schedule{Instances: 2, Clients: 1},
		Seed: 3, Budget: time.Hour, ShrinkBudget: time.Hour, Batch: 5, Replays: 4, Need: 3, Liveness: liveness, Verify: true, Log: &log, Now: clk.now}
}

func TestHuntFindsConfirmsAndShrinks(t *testing.T) {
	cfg := testConfig(t, false)
	m := &modelRunner{lease: cfg.Space.Lease}
	res, err := Hunt(context.Background(), cfg, m)
	if err != nil {
		t.Fatalf("Hunt: %v\n%s", err, cfg.Log)
	}
	if res.Finding == nil || res.Finding.Class != realized.ClassTwoHolders {
		t.Fatalf("finding %+v; want two holders\n%s", res.Finding, cfg.Log)
	}
	if res.Finding.Replays.Hits != 4 {
		t.Errorf("replays %s; the model recurs every time", res.Finding.Replays)
	}
	sm := res.Smallest
	if sm == nil || len(sm.Faults) != 1 {
		t.Fatalf("smallest %v; want one fault\n%s", sm, cfg.Log)
	}
	f := sm.Faults[0]
	if f.Type != "pause" || f.Target != "holder" || f.For < cfg.Space.Lease || f.For >= 2*cfg.Space.Lease {
		t.Errorf("smallest fault %s; want the holder paused for at least a lease and less than two (halving stops there)", f)
	}
	if sm.Instances*sm.Clients != 2 {
		t.Errorf("smallest has %d clients; the model needs two", sm.Instances*sm.Clients)
	}
	if sm.PlanSeed == 0 {
		t.Errorf("the smallest schedule lost its plan seed")
	}
	t.Logf("written:\n%s", res.Written)
	if _, err := scenario.Parse("shrunk.yaml", []byte(res.Written)); err != nil {
		t.Errorf("the written scenario does not validate: %v\n%s", err, res.Written)
	}
	for _, want := range []string{"spread: false", "need: 3", "violations: true", "plan_seed:"} {
		if !strings.Contains(res.Written, want) {
			t.Errorf("the written scenario lacks %q:\n%s", want, res.Written)
		}
	}
	if res.Verified == nil || res.Verified.Hits != 4 {
		t.Errorf("verified %v; want 4 of 4", res.Verified)
	}
	md := res.Markdown(cfg)
	for _, want := range []string{"## Shrinking", "## Coverage", "| pause | holding |", "recurs"} {
		if !strings.Contains(md+strings.Join(res.Summary(cfg), "\n"), want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
}

func TestHuntLivenessStopsAtALockThatNeverCameBack(t *testing.T) {
	cfg := testConfig(t, true)
	cfg.Space.Kinds = []Weighted{{"kill", 1}}
	cfg.Space.Targets = []Weighted{{"holder", 1}}
	res, err := Hunt(context.Background(), cfg, &modelRunner{lease: cfg.Space.Lease})
	if err != nil {
		t.Fatalf("Hunt: %v", err)
	}
	if res.Finding == nil || res.Finding.Class != realized.ClassNeverBack {
		t.Fatalf("finding %+v; want never-back", res.Finding)
	}
	if !strings.Contains(res.Written, "available: false") {
		t.Errorf("written scenario:\n%s", res.Written)
	}
}

func TestHuntThatFindsNothingBoundsTheRate(t *testing.T) {
	cfg := testConfig(t, false)
	cfg.Space.Kinds = []Weighted{{"cpu-starve", 1}}
	cfg.MaxTrials = 12
	m := &modelRunner{lease: cfg.Space.Lease}
	res, err := Hunt(context.Background(), cfg, m)
	if err != nil {
		t.Fatalf("Hunt: %v", err)
	}
	if res.Finding != nil || res.Trials != 12 || m.runs != 3 {
		t.Fatalf("finding %v, %d trials in %d runs; want none, 12 in 3 (5, 5, 2)", res.Finding, res.Trials, m.runs)
	}
	sum := strings.Join(res.Summary(cfg), "\n")
	for _, want := range []string{"found nothing", "in 12 decided trials", "95% ≤ 24.2% per trial", "least covered", "not \"safe\""} {
		if !strings.Contains(sum, want) {
			t.Errorf("summary lacks %q:\n%s", want, sum)
		}
	}
}

func TestHuntStopsAtItsBudget(t *testing.T) {
	cfg := testConfig(t, false)
	cfg.Space.Kinds = []Weighted{{"cpu-starve", 1}}
	cfg.Budget = 10 * time.Second // the fake clock moves a second a read: a few batches
	m := &modelRunner{lease: cfg.Space.Lease}
	res, err := Hunt(context.Background(), cfg, m)
	if err != nil {
		t.Fatalf("Hunt: %v", err)
	}
	if res.Batches < 1 || res.Batches > 5 {
		t.Errorf("%d batches within a 10s budget on a clock that moves 1s a read", res.Batches)
	}
}

func TestAnAccidentIsNotAFinding(t *testing.T) {
	cfg := testConfig(t, false)
	cfg.Space.Kinds = []Weighted{{"pause", 1}}
	cfg.Space.Targets = []Weighted{{"holder", 1}}
	cfg.Space.Windows = []float64{2}
	cfg.MaxTrials = 5
	// Unsafe in the hunt's batch, never in a replay.
	r := &flakyRunner{modelRunner{lease: cfg.Space.Lease}}
	res, err := Hunt(context.Background(), cfg, r)
	if err != nil {
		t.Fatalf("Hunt: %v", err)
	}
	if res.Finding != nil || len(res.Accidents) == 0 {
		t.Fatalf("finding %v, accidents %v; want no finding and an accident", res.Finding, res.Accidents)
	}
	if !strings.Contains(strings.Join(res.Summary(cfg), "\n"), "did not recur") {
		t.Errorf("summary: %v", res.Summary(cfg))
	}
}

// flakyRunner fails only in a hunt's batches.
type flakyRunner struct{ modelRunner }

func (f *flakyRunner) Run(ctx context.Context, name string, src []byte) (*realized.Run, string, error) {
	r, dir, err := f.modelRunner.Run(ctx, name, src)
	if err == nil && !strings.HasPrefix(name, "hunt-b") {
		for i := range r.Trials {
			r.Trials[i].Outcome.Violations = 0
		}
	}
	return r, dir, err
}

func TestWhatAHuntStopsAt(t *testing.T) {
	for _, tc := range []struct {
		damageOnly, liveness bool
		o                    realized.Outcome
		want                 bool
	}{
		{false, false, realized.Outcome{Violations: 1}, true},
		{true, false, realized.Outcome{Violations: 1}, false}, // the store kept the data: belief alone is not damage
		{true, false, realized.Outcome{Violations: 1, Damage: 1}, true},
		{false, false, realized.Outcome{Valid: true, NeverBack: true}, false},
		{false, true, realized.Outcome{Valid: true, NeverBack: true}, true},
		{false, true, realized.Outcome{Valid: false, NeverBack: true}, false}, // the harness may be why
	} {
		c := Config{DamageOnly: tc.damageOnly, Liveness: tc.liveness}
		if got := c.fails(tc.o); got != tc.want {
			t.Errorf("damage only %v, liveness %v, %+v: fails %v; want %v", tc.damageOnly, tc.liveness, tc.o, got, tc.want)
		}
	}
}
