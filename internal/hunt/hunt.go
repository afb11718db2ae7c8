package hunt

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/lockbench/lockbench/internal/realized"
	"github.com/lockbench/lockbench/internal/scenario"
	"github.com/lockbench/lockbench/verdict"
)

// Runner runs a scenario file's text and returns the realized schedules
// of its trials and the results folder it wrote. bench gives it the real
// runner; tests a fake one.
type Runner interface {
	Run(ctx context.Context, name string, src []byte) (*realized.Run, string, error)
}

// Config is what a hunt searches, and within what.
type Config struct {
	Backend  string
	Template Template
	Space    Space
	// Base is every trial's workload size (instances, clients).
	Base Schedule
	Seed int64
	// Budget bounds the search's time (the batches started), MaxTrials
	// its trials (0: no bound); confirming and shrinking a finding have a
	// budget of their own, ShrinkBudget.
	Budget       time.Duration
	MaxTrials    int
	ShrinkBudget time.Duration
	// Batch is how many trials run side by side at once.
	Batch int
	// Replays and Need: a failure counts when it recurs in at least Need
	// of Replays replays of its realized schedule, and a shrinking step is
	// kept only then.
	Replays, Need int
	// Liveness stops the hunt at a lock that never came back too, not
	// only at a safety violation.
	Liveness bool
	// DamageOnly counts as a safety violation only a late write that
	// landed, not two clients believing they hold the lock: for a lock
	// whose work is in its own store (etcd-txn, postgres-for-update),
	// which promises the data, not the belief.
	DamageOnly bool
	// Verify runs the written scenario once more at the end (Replays
	// trials side by side) and says how often it reproduced.
	Verify bool
	Log    io.Writer
	Now    func() time.Time
}

// Result is what a hunt did and found.
type Result struct {
	Backend string        `json:"backend"`
	Seed    int64         `json:"seed"`
	Started time.Time     `json:"started"`
	Elapsed time.Duration `json:"elapsed_ns"`
	// Searched is the time the search took, until its last batch ended
	// (Elapsed adds confirming and shrinking).
	Searched time.Duration `json:"searched_ns"`
	Budget   time.Duration `json:"budget_ns"`
	Batches  int           `json:"batches"`
	Trials   int           `json:"trials"`
	Decided  int           `json:"decided"`
	Invalid  int           `json:"invalid"`
	Unsafe   int           `json:"unsafe"`
	NeverBck int           `json:"never_back"`
	// Accidents are failures that did not recur in Need of Replays
	// replays.
	Accidents []Finding `json:"accidents,omitempty"`
	Finding   *Finding  `json:"finding,omitempty"`
	Shrink    []Step    `json:"shrink,omitempty"`
	Smallest  *Schedule `json:"smallest,omitempty"`
	// Written is the scenario file of the smallest schedule, Verified how
	// often it reproduced when run once more.
	Written  string         `json:"written,omitempty"`
	Verified *verdict.Rate  `json:"verified,omitempty"`
	Coverage *Coverage      `json:"-"`
	Cells    []CellCount    `json:"coverage"`
	Bound    verdict.Rate   `json:"unsafe_rate"`
	Runs     []string       `json:"runs"`
	Tried    map[string]int `json:"tried"`
}

// Finding is a trial that failed, with its realized schedule and how
// often it recurred.
type Finding struct {
	Trial    string       `json:"trial"`
	Run      string       `json:"run"`
	Class    string       `json:"class"`
	Phases   []string     `json:"phases"`
	Schedule Schedule     `json:"schedule"`
	Replays  verdict.Rate `json:"replays"`
	Invalid  int          `json:"replays_invalid"`
}

// fails says whether an outcome is a failure a hunt stops at.
func (c *Config) fails(o realized.Outcome) bool {
	return c.unsafe(o) || (c.Liveness && neverBack(o))
}

// neverBack is a lock that never came back in a trial that could be
// judged: a harness that failed may be why nothing was granted.
func neverBack(o realized.Outcome) bool { return o.NeverBack && o.Valid }

// unsafe is the safety violation this hunt looks for.
func (c *Config) unsafe(o realized.Outcome) bool {
	if c.DamageOnly {
		return o.Damage > 0
	}
	return o.Unsafe()
}

// sameFailure says whether a replay's outcome is the finding's failure
// again: unsafe for an unsafe one, never back for a lock that never came
// back.
func (c *Config) sameFailure(class string) func(realized.Outcome) bool {
	if class == realized.ClassNeverBack {
		return neverBack
	}
	return c.unsafe
}

func (c *Config) logf(format string, args ...any) {
	if c.Log != nil {
		fmt.Fprintf(c.Log, format+"\n", args...)
	}
}

// Hunt searches, confirms and shrinks. It returns what it did even when
// it stops on an error.
func Hunt(ctx context.Context, c Config, r Runner) (*Result, error) {
	if err := c.Space.Validate(); err != nil {
		return nil, err
	}
	if c.Batch < 1 || c.Replays < 1 || c.Need < 1 || c.Need > c.Replays {
		return nil, fmt.Errorf("hunt: batch %d, replays %d, need %d: want batch ≥ 1 and 1 ≤ need ≤ replays", c.Batch, c.Replays, c.Need)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	var kinds []string
	for _, k := range c.Space.Kinds {
		kinds = append(kinds, k.Value)
	}
	res := &Result{Backend: c.Backend, Seed: c.Seed, Started: c.Now(), Budget: c.Budget, Coverage: NewCoverage(kinds, c.Space.Lease), Tried: map[string]int{}}
	defer func() { res.Elapsed, res.Cells = c.Now().Sub(res.Started), res.Coverage.List() }()
	rng := rand.New(rand.NewPCG(uint64(c.Seed), 0x68756e74))
	var last time.Duration // the last batch's wall time: the next is not started past the budget
	for {
		spent := c.Now().Sub(res.Started)
		if res.Batches > 0 && (spent+last > c.Budget || (c.MaxTrials > 0 && res.Trials >= c.MaxTrials)) {
			break
		}
		if err := ctx.Err(); err != nil {
			return res, err
		}
		n := c.Batch
		if c.MaxTrials > 0 {
			n = min(n, c.MaxTrials-res.Trials)
		}
		per := make([][]Fault, n)
		for i := range per {
			per[i] = c.Space.Draw(rng)
		}
		res.Batches++
		s := c.Base
		s.Duration = Length(per, c.Space.Lease)
		t0 := c.Now()
		run, dir, err := c.run(ctx, r, fmt.Sprintf("hunt-b%d", res.Batches), Spec{Name: c.Backend, Schedule: s, Trials: n, Need: 1, SideBySide: n, PerTrial: per})
		last = c.Now().Sub(t0)
		res.Searched = c.Now().Sub(res.Started)
		if dir != "" {
			res.Runs = append(res.Runs, dir)
		}
		if err != nil {
			return res, err
		}
		var failed []realized.Trial
		for _, t := range run.Trials {
			res.Trials++
			res.Coverage.Add(t)
			for _, f := range t.Faults {
				res.Tried[f.Type+" "+f.Target]++
			}
			o := t.Outcome
			switch {
			case c.unsafe(o):
				res.Unsafe++
			case !o.Valid:
				res.Invalid++ // could not be judged, and showed none of what this hunt stops at
			case neverBack(o):
				res.NeverBck++
			}
			if o.Valid || c.unsafe(o) {
				res.Decided++
			}
			if c.fails(o) {
				failed = append(failed, t)
			}
		}
		c.logf("batch %d: %d trials in %s (%s of %s spent): %d unsafe, %d never back, %d invalid so far; %s; tried %s", res.Batches, n, last.Round(time.Second),
			c.Now().Sub(res.Started).Round(time.Second), c.Budget, res.Unsafe, res.NeverBck, res.Invalid, res.Coverage, res.triedKinds(kinds))
		// Unsafe first: a safety violation is the finding a liveness
		// hunt still prefers.
		for pass := 0; pass < 2 && res.Finding == nil; pass++ {
			for _, t := range failed {
				if (pass == 0) != c.unsafe(t.Outcome) {
					continue
				}
				f, err := c.confirm(ctx, r, res, t, dir)
				if err != nil {
					return res, err
				}
				if f.Replays.Hits >= c.Need {
					res.Finding = f
					break
				}
				res.Accidents = append(res.Accidents, *f)
				if len(res.Accidents) >= 3 {
					break // the budget is for searching, not for replaying accidents
				}
			}
		}
		if res.Finding != nil {
			break
		}
	}
	res.Bound = verdict.NewRate(res.Unsafe, res.Decided)
	if res.Finding == nil {
		return res, nil
	}
	return res, c.shrink(ctx, r, res)
}

// triedKinds says how many faults of each kind were drawn so far.
func (r *Result) triedKinds(kinds []string) string {
	n := map[string]int{}
	for k, c := range r.Tried {
		kind, _, _ := strings.Cut(k, " ")
		n[kind] += c
	}
	var out []string
	for _, k := range kinds {
		out = append(out, fmt.Sprintf("%s×%d", k, n[k]))
	}
	return strings.Join(out, " ")
}

// confirm replays a failed trial's realized schedule.
func (c *Config) confirm(ctx context.Context, r Runner, res *Result, t realized.Trial, dir string) (*Finding, error) {
	f := &Finding{Trial: t.Case, Run: dir, Class: t.Outcome.Class(), Schedule: c.scheduleOf(t)}
	if t.Outcome.NeverBack && !c.unsafe(t.Outcome) {
		f.Class = realized.ClassNeverBack
	}
	for _, rf := range t.Faults {
		f.Phases = append(f.Phases, rf.Phase)
	}
	c.logf("  %s: %s (%s); replaying it %d times", t.Case, f.Class, f.Schedule, c.Replays)
	hits, invalid, dir2, err := c.evaluate(ctx, r, fmt.Sprintf("confirm-%d", len(res.Accidents)+1), f.Schedule, c.sameFailure(f.Class))
	if dir2 != "" {
		res.Runs = append(res.Runs, dir2)
	}
	if err != nil {
		return f, err
	}
	f.Replays, f.Invalid = verdict.NewRate(hits, c.Replays), invalid
	verb := "recurs"
	if hits < c.Need {
		verb = fmt.Sprintf("below %d of %d: not counted, the search goes on", c.Need, c.Replays)
	}
	c.logf("  %s: %s in %s replays (need %d): %s", t.Case, f.Class, f.Replays, c.Need, verb)
	return f, nil
}

// scheduleOf is a trial's realized schedule, its own faults at the times
// they were scheduled.
func (c *Config) scheduleOf(t realized.Trial) Schedule {
	s := c.Base
	s.Duration, s.PlanSeed = time.Duration(t.DurationNs), t.PlanSeed
	for _, f := range t.Faults {
		s.Faults = append(s.Faults, Fault{Type: f.Type, Target: f.Target, At: time.Duration(f.AtNs), For: time.Duration(f.ForNs), Options: f.Options, Phase: f.Phase})
	}
	return s
}

// evaluate runs a schedule Replays times side by side and counts the
// replays whose outcome is the failure again, and those that could not
// be judged.
func (c *Config) evaluate(ctx context.Context, r Runner, name string, s Schedule, same func(realized.Outcome) bool) (hits, invalid int, dir string, err error) {
	run, dir, err := c.run(ctx, r, name, Spec{Name: c.Backend, Schedule: s, Trials: c.Replays, Need: 1, SideBySide: c.Replays})
	if err != nil {
		return 0, 0, dir, err
	}
	for _, t := range run.Trials {
		switch {
		case same(t.Outcome):
			hits++
		case t.Outcome.Class() == realized.ClassInvalid:
			invalid++
		}
	}
	return hits, invalid, dir, nil
}

// run renders, validates and runs one scenario.
func (c *Config) run(ctx context.Context, r Runner, name string, specs ...Spec) (*realized.Run, string, error) {
	for i := range specs {
		specs[i].Name = caseName(specs[i].Name)
	}
	src, err := c.Template.Render(name, c.Seed, specs)
	if err != nil {
		return nil, "", err
	}
	if _, err := scenario.Parse(name+".yaml", src); err != nil {
		return nil, "", fmt.Errorf("hunt: the scenario drawn is invalid (a bug of the hunt's drawing): %w\n%s", err, src)
	}
	run, dir, err := r.Run(ctx, name, src)
	if err != nil {
		return run, dir, fmt.Errorf("%s: %w", name, err)
	}
	if run == nil {
		return nil, dir, errors.New(name + ": no realized schedules")
	}
	return run, dir, nil
}

// caseName turns a backend's name into a case's (no dots).
func caseName(s string) string {
	out := []rune(s)
	for i, r := range out {
		if r == '.' || r == ' ' || r == '/' {
			out[i] = '-'
		}
	}
	return string(out)
}
