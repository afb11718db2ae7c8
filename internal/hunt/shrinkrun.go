package hunt

import (
	"context"
	"fmt"
	"time"

	"github.com/lockbench/lockbench/internal/realized"
	"github.com/lockbench/lockbench/verdict"
)

// maxShrinkRuns bounds the candidates tried, whatever the budget.
const maxShrinkRuns = 40

// shrink makes the finding's schedule smaller, one step at a time: the
// first candidate under which the failure still recurs in Need of
// Replays replays is kept, and the next round starts from it. It stops
// when no candidate is kept or its budget is spent, then writes the
// smallest schedule as a scenario (Result.Written) and, with Verify,
// runs that file once more.
func (c *Config) shrink(ctx context.Context, r Runner, res *Result) error {
	f := res.Finding
	cur := f.Schedule
	same := c.sameFailure(f.Class)
	t0 := c.Now()
	runs := 0
	c.logf("shrinking %s (%s): each step kept only if it recurs in %d of %d replays", f.Trial, cur, c.Need, c.Replays)
	for round := 1; ; round++ {
		kept := false
		for _, cand := range Candidates(cur, c.Space.Lease) {
			if c.Now().Sub(t0) > c.ShrinkBudget || runs >= maxShrinkRuns {
				c.logf("  shrinking budget spent (%s, %d runs)", c.Now().Sub(t0).Round(time.Second), runs)
				break
			}
			if err := ctx.Err(); err != nil {
				return err
			}
			runs++
			hits, invalid, dir, err := c.evaluate(ctx, r, fmt.Sprintf("shrink-%d", runs), cand.Schedule, same)
			if dir != "" {
				res.Runs = append(res.Runs, dir)
			}
			if err != nil {
				return err
			}
			st := Step{Round: round, Step: cand.Step, Schedule: cand.Schedule.String(), Hits: hits, Of: c.Replays, Invalid: invalid, Kept: hits >= c.Need}
			res.Shrink = append(res.Shrink, st)
			mark := "✗ dropped"
			if st.Kept {
				mark = "✓ kept"
			}
			c.logf("  round %d: %s: %d of %d replays %s → %s", round, cand.Step, hits, c.Replays, f.Class, mark)
			if st.Kept {
				cur, kept = cand.Schedule, true
				break
			}
		}
		if !kept {
			break
		}
	}
	res.Smallest = &cur
	src, err := c.Written(cur, f.Class)
	if err != nil {
		return err
	}
	res.Written = string(src)
	if !c.Verify {
		return nil
	}
	run, dir, err := c.runSource(ctx, r, "verify", src)
	if dir != "" {
		res.Runs = append(res.Runs, dir)
	}
	if err != nil {
		return err
	}
	hits := 0
	for _, t := range run.Trials {
		if same(t.Outcome) {
			hits++
		}
	}
	v := verdict.NewRate(hits, len(run.Trials))
	res.Verified = &v
	c.logf("the written scenario: %s in %s trials", f.Class, v)
	return nil
}

// Written is the scenario file of a schedule: its trials side by side,
// the times as written, the plan seed, and the failure as its
// expectation, Need of Replays.
func (c *Config) Written(s Schedule, class string) ([]byte, error) {
	exp := "{violations: true, stale_writes_accepted: any, lost_updates: any, available: any, token_regressions: any, leases_lost: any, note: found by bench hunt}"
	switch {
	case c.DamageOnly && class != realized.ClassNeverBack:
		exp = "{lost_updates: true, violations: any, stale_writes_accepted: any, available: any, token_regressions: any, leases_lost: any, note: found by bench hunt}"
	case class == realized.ClassNeverBack:
		exp = "{available: false, violations: any, stale_writes_accepted: any, lost_updates: any, token_regressions: any, leases_lost: any, note: found by bench hunt}"
	}
	src, err := c.Template.Render("hunt-"+caseName(c.Backend)+"-shrunk", c.Seed, []Spec{{Name: caseName(c.Backend) + "-shrunk", Schedule: s, Trials: c.Replays, Need: c.Need, SideBySide: c.Replays, Expect: exp}})
	if err != nil {
		return nil, err
	}
	return src, nil
}

// runSource runs a scenario's text as it is.
func (c *Config) runSource(ctx context.Context, r Runner, name string, src []byte) (*realized.Run, string, error) {
	run, dir, err := r.Run(ctx, name, src)
	if err != nil {
		return run, dir, fmt.Errorf("%s: %w", name, err)
	}
	if run == nil {
		return nil, dir, fmt.Errorf("%s: no realized schedules", name)
	}
	return run, dir, nil
}
