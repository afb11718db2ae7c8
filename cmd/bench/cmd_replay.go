package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/lockbench/lockbench/internal/exitcode"
	"github.com/lockbench/lockbench/internal/hunt"
	"github.com/lockbench/lockbench/internal/layout"
	"github.com/lockbench/lockbench/internal/realized"
	"github.com/lockbench/lockbench/internal/scenario"
	"github.com/lockbench/lockbench/verdict"
)

func replayCmd() *command {
	c := newCommand("replay", "RESULTS_DIR [CASE]", "run a trial's realized schedule again, N times, and say how often it gave the same verdict", 1, 2)
	c.long = `Reads the results folder's realized.json (written by every run) and runs
the schedule one trial really met again, N times: its faults at the times
they were scheduled (spread: false), its clients' plan (plan_seed), the
case's backend, options and workload as the scenario wrote them; side by
side where the faults allow it, else one after another. CASE names a
trial (row.t3) or a row (its first unsafe trial, else its first whose
lock never came back, else its first); without it, the run's first such
trial. It prints how many replays gave the same outcome (damage, two
holders, a lock that never came back, clean) as the trial did, with its
95% interval: a property of the lock recurs, an accident does not.
Exit code: 102 when fewer than -need replays gave it, else 0.`
	out := c.fs.String("o", envOr("RESULTS_DIR", "results"), "folder under which the replay's folder is created (env RESULTS_DIR)")
	n := c.fs.Int("n", 10, "replays")
	need := c.fs.Int("need", 0, "exit 102 when fewer replays than this gave the same outcome")
	c.exec = func(ctx context.Context, cio cmdIO, args []string) error {
		src := args[0]
		name := ""
		if len(args) > 1 {
			name = args[1]
		}
		if *n < 1 || *n > 100 || *need < 0 || *need > *n {
			return exitcode.With(fmt.Errorf("-n %d, -need %d: want 1 ≤ n ≤ 100 and 0 ≤ need ≤ n", *n, *need), exitcode.Config)
		}
		if st, err := os.Stat(src); err != nil || !st.IsDir() {
			return exitcode.With(fmt.Errorf("replay %s: not a results folder", src), exitcode.Config)
		}
		rr, err := readRealized(src)
		if err != nil {
			return err
		}
		t, err := rr.Find(name)
		if err != nil {
			return exitcode.With(err, exitcode.Config)
		}
		rf, err := layout.ReadRun(src)
		if err != nil {
			return exitcode.With(fmt.Errorf("replay %s: %w", src, err), exitcode.Config)
		}
		cfg, s, err := replayPlan(rf, t)
		if err != nil {
			return err
		}
		fmt.Fprintf(cio.stdout, "replay %s of %s: %s, %s (outcome then: %s); %d times\n", t.Case, src, t.Backend, s, t.Outcome.Class(), *n)
		var src2 []byte
		for _, side := range []int{min(*n, scenario.MaxLanes), 0} {
			src2, err = cfg.Template.Render("replay-"+t.Row, rf.Seed, []hunt.Spec{{Name: t.Row, Schedule: s, Trials: *n, Need: 1, SideBySide: side}})
			if err != nil {
				return err
			}
			if _, err = scenario.Parse("replay.yaml", src2); err == nil {
				if side == 0 && *n > 1 {
					fmt.Fprintln(cio.stdout, "  its faults cannot run side by side: the replays run one after another")
				}
				break
			}
		}
		if err != nil {
			return exitcode.With(fmt.Errorf("the replayed schedule does not validate: %w", err), exitcode.Config)
		}
		dir, err := layout.New(*out, "replay-"+t.Row, time.Now())
		if err != nil {
			return fmt.Errorf("replay folder: %w", err)
		}
		run, rdir, err := (&benchRunner{root: dir, network: rf.Network}).Run(ctx, "replay", src2)
		if err != nil {
			return err
		}
		want := t.Outcome.Class()
		hits, invalid := 0, 0
		for _, r := range run.Trials {
			got := r.Outcome.Class()
			if got == want {
				hits++
			} else if got == realized.ClassInvalid {
				invalid++
			}
			fmt.Fprintf(cio.stdout, "  %-24s %-12s violations=%d damage=%d longest_gap=%.0fms\n", r.Case, got, r.Outcome.Violations, r.Outcome.Damage, r.Outcome.LongestGapMs)
		}
		rate := verdict.NewRate(hits, len(run.Trials))
		fmt.Fprintf(cio.stdout, "same outcome (%s) in %s replays; %d invalid\nresults: %s\n", want, rate, invalid, rdir)
		if hits < *need {
			return exitcode.With(fmt.Errorf("%s in %d replays, fewer than %d", want, hits, *need), exitcode.NotReproduced)
		}
		return nil
	}
	return c
}

// readRealized reads a results folder's realized schedules, building them
// from its history when the folder is older than realized.json.
func readRealized(dir string) (*realized.Run, error) {
	r, err := realized.Read(dir)
	if err == nil {
		return r, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, exitcode.With(err, exitcode.Config)
	}
	sum, err := analyzePath(dir)
	if err != nil {
		return nil, err
	}
	r, err = realized.Build(dir, sum)
	if err != nil {
		return nil, exitcode.With(err, exitcode.Config)
	}
	return r, nil
}

// replayPlan finds the trial's case in the scenario its run stored and
// returns the template to render it from and the trial's schedule.
func replayPlan(rf *layout.Run, t *realized.Trial) (hunt.Config, hunt.Schedule, error) {
	var cfg hunt.Config
	sc, err := scenario.ParseWith(filepath.Base(rf.ScenarioFile), []byte(rf.ScenarioText), scenario.Options{Network: rf.Network})
	if err != nil {
		return cfg, hunt.Schedule{}, exitcode.With(fmt.Errorf("the run's scenario does not validate with this version: %w", err), exitcode.Config)
	}
	var c *scenario.Case
	for _, sc := range sc.Cases {
		if sc.Row == t.Row || sc.Name == t.Batch {
			c = sc
			break
		}
	}
	if c == nil || c.Source == nil {
		return cfg, hunt.Schedule{}, exitcode.With(fmt.Errorf("case %s is not in the run's scenario", t.Row), exitcode.Config)
	}
	cfg.Template = hunt.Template{Top: sc.Doc, Case: c.Source}
	s := hunt.Schedule{Instances: c.Workload.Instances, Clients: c.Workload.Clients, Duration: time.Duration(t.DurationNs), PlanSeed: t.PlanSeed}
	if c.LaneInstances > 0 {
		s.Instances = c.LaneInstances
	}
	for _, f := range t.Faults {
		s.Faults = append(s.Faults, hunt.Fault{Type: f.Type, Target: f.Target, At: time.Duration(f.AtNs), For: time.Duration(f.ForNs), Options: f.Options})
	}
	return cfg, s, nil
}
