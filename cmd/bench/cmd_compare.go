package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/lockbench/lockbench/internal/exitcode"
	"github.com/lockbench/lockbench/report"
	"github.com/lockbench/lockbench/verdict"
)

// percent is a flag holding a percentage, written "5%" or "5" (always
// percent: "0.05" is 0.05%, not 5%).
type percent float64

func (p *percent) String() string { return strconv.FormatFloat(float64(*p), 'g', -1, 64) + "%" }
func (p *percent) Set(v string) error {
	f, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), "%"), 64)
	if err != nil || f < 0 || f >= 1000 {
		return errors.New("want a percentage such as 5% or 10")
	}
	*p = percent(f)
	return nil
}

func compareCmd() *command {
	c := newCommand("compare", "OLD NEW", "compare two results folders (or folders of repeated runs) and gate on regressions", 2, 2)
	c.long = `Benchstat style: per case and metric, medians with confidence intervals
and a Mann-Whitney U test; "~" when a difference is not significant. A
performance metric regresses (exit 99) when the change is significant and
beyond the noise floor; a safety count rising from zero in every old run
fails at once (exit 100). With too few runs a side nothing can be
significant: the output says so first, and large changes in the bad
direction are marked "unverified"; -min-runs makes that a failure (101).`
	alpha := c.fs.Float64("alpha", report.DefaultCompareOptions.Alpha, "significance level of the Mann-Whitney U test")
	noise := percent(report.DefaultCompareOptions.NoiseFloor * 100)
	c.fs.Var(&noise, "noise", "noise floor: smaller changes never fail (\"5%\" or 5)")
	minRuns := c.fs.Int("min-runs", 0, "fail (exit 101) unless each side has at least this many runs")
	jsonOut := c.fs.Bool("json", false, "print the comparison as JSON")
	c.exec = func(_ context.Context, cio cmdIO, args []string) error {
		if *alpha <= 0 || *alpha >= 1 {
			return exitcode.With(fmt.Errorf("-alpha %v: want a value between 0 and 1", *alpha), exitcode.Config)
		}
		var sets [2][]*verdict.Summary
		for i, dir := range args {
			set, err := report.LoadSet(dir)
			if err != nil {
				return exitcode.With(err, exitcode.Config)
			}
			for _, s := range set {
				if v := s.Verdicts(); v[verdict.RowInvalid] > 0 {
					return exitcode.With(fmt.Errorf("run %s in %s has invalid cases: it cannot be a baseline or a candidate", s.RunID, dir), exitcode.Invalid)
				}
			}
			sets[i] = set
		}
		cmp := report.Compare(sets[0], sets[1], report.CompareOptions{Alpha: *alpha, NoiseFloor: float64(noise) / 100})
		if len(cmp.Deltas) == 0 {
			return exitcode.With(errors.New("the two sets have no case in common"), exitcode.Config)
		}
		var err error
		if *jsonOut {
			err = writeJSON(cio.stdout, cmp)
		} else {
			err = cmp.Write(cio.stdout)
		}
		if err != nil {
			return err
		}
		perf, safety := cmp.Regressions()
		switch {
		case safety > 0:
			return exitcode.With(fmt.Errorf("%d safety count(s) went from zero to non-zero", safety), exitcode.Violation)
		case *minRuns > 0 && (cmp.OldRuns < *minRuns || cmp.NewRuns < *minRuns):
			return exitcode.With(fmt.Errorf("-min-runs %d: %d old and %d new run(s) are too few to judge", *minRuns, cmp.OldRuns, cmp.NewRuns), exitcode.Invalid)
		case perf > 0:
			return exitcode.With(fmt.Errorf("%d significant regression(s) beyond the %v noise floor", perf, noise.String()), exitcode.Threshold)
		}
		return nil
	}
	return c
}

func agreeCmd() *command {
	c := newCommand("agree", "RUN RUN [RUN...]", "check that runs of one profile agree: no verdict flipped, no two-holders or damage interval disjoint", 1, -1)
	c.long = `Each RUN is a results folder, or a folder of them (make stability's).
For every row held by two runs or more, its verdict in each run and its
rate of two holders with the 95% interval; for every decision cell, its
two-holders and damage rates. A row whose verdict differs between runs, or
a rate whose intervals do not overlap, means an outcome held by luck in one
of them (or a lock that changed between them): exit 102. Read it as a
warning threshold, not a test at 5%: two 95% intervals of one rate miss
each other in well under 1% of pairs. A run given twice (one folder named
twice, a copy of a folder: one run id, or one trial in both) is one run,
and is refused: exit 104.`
	jsonOut := c.fs.Bool("json", false, "print the agreement as JSON")
	c.exec = func(_ context.Context, cio cmdIO, args []string) error {
		var runs []*verdict.Summary
		folders := map[string]string{}
		for _, dir := range args {
			// MODEL §17 (A5): a run repeated is one run. The same folder
			// named twice (results/latest beside the folder it links to)
			// is refused here, a copy by its run id or its trials below.
			real, err := filepath.EvalSymlinks(dir)
			if err == nil {
				real, err = filepath.Abs(real)
			}
			if err != nil {
				real = filepath.Clean(dir)
			}
			if first, ok := folders[real]; ok {
				return exitcode.With(fmt.Errorf("%s and %s are one folder: a run given twice is one run, and agreement needs independent runs", first, dir), exitcode.Config)
			}
			folders[real] = dir
			set, err := report.LoadSet(dir)
			if err != nil {
				return exitcode.With(err, exitcode.Config)
			}
			runs = append(runs, set...)
		}
		if len(runs) < 2 {
			return exitcode.With(fmt.Errorf("%d run(s) found: agreement needs two or more", len(runs)), exitcode.Config)
		}
		if why := verdict.Repeated(runs...); why != "" {
			return exitcode.With(fmt.Errorf("%s: a run given twice is one run, and agreement needs independent runs", why), exitcode.Config)
		}
		a := verdict.Agree(runs...)
		if *jsonOut {
			if err := writeJSON(cio.stdout, a); err != nil {
				return err
			}
		} else if err := report.WriteAgreement(cio.stdout, a); err != nil {
			return err
		}
		if !a.Agreed() {
			return exitcode.With(fmt.Errorf("the %d runs disagree: %d verdict(s) flipped, %d rate(s) with disjoint intervals", len(runs), a.Flipped, a.Disjoint), exitcode.NotReproduced)
		}
		return nil
	}
	return c
}
