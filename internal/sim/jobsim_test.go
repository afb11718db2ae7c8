package sim_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/lockbench/lockbench/checker"
	"github.com/lockbench/lockbench/history"
	"github.com/lockbench/lockbench/internal/sim"
	"github.com/lockbench/lockbench/verdict"
)

// TestJobsAgainstChecker compares every job figure the checker gives
// (MODEL §20), the job rows and the jobs decision view (§21) with the
// simulator's truth, for seeds 1..N of SimulateJobs (the seeds of
// TestAgainstChecker: SIM_SEEDS, SIM_SEED).
func TestJobsAgainstChecker(t *testing.T) {
	from, to := seeds()
	var all []string
	compared, aggregates := 0, 0
	kinds := map[string]int{}
	for seed := from; seed <= to; seed++ {
		ms, truth := compareJobs(seed)
		compared += len(truth.Cases)
		if truth.Compared {
			aggregates++
		}
		for _, c := range truth.Cases {
			kinds[c.Status]++
			if c.Jobs.Periodic {
				kinds["periodic"]++
			}
			if c.Jobs.Stuck > 0 {
				kinds["stuck"]++
			}
			for _, f := range c.Jobs.Faults {
				if f.Aimed != "" {
					kinds["aimed at "+f.Aimed]++
				}
			}
			if c.Jobs.Concurrent > 0 {
				kinds["concurrent"]++
			}
			if c.Jobs.Sequential > 0 {
				kinds["sequential"]++
			}
			if c.Jobs.StaleAccepted > 0 {
				kinds["stale accepted"]++
			}
		}
		if len(ms) > 0 {
			dir := saveJobs(t, seed)
			for _, m := range ms {
				all = append(all, fmt.Sprintf("seed %d: %s (%s)", seed, m, dir))
			}
		}
	}
	t.Logf("%d cases compared over seeds %d..%d, %d runs' rows and decision view; %v", compared, from, to, aggregates, kinds)
	for _, need := range []string{"concurrent", "sequential", "stuck", "periodic", "aimed at during-effect", "ok", "invalid"} {
		if kinds[need] == 0 && to-from >= 30 {
			t.Errorf("no simulated case shows %q: the comparison does not cover it", need)
		}
	}
	if len(all) > 0 {
		if len(all) > 40 {
			all = append(all[:40], fmt.Sprintf("... %d more", len(all)-40))
		}
		t.Errorf("%d mismatches between the checker and the jobs truth (MODEL §20, §21):\n%s", len(all), strings.Join(all, "\n"))
	}
}

func saveJobs(t *testing.T, seed uint64) string {
	dir := filepath.Join(t.TempDir(), fmt.Sprintf("jobs-seed%d", seed))
	if os.MkdirAll(dir, 0o755) != nil {
		return ""
	}
	r := sim.SimulateJobs(seed)
	os.WriteFile(filepath.Join(dir, "history.jsonl"), r.Files(), 0o644)
	b, _ := json.MarshalIndent(r.Truth(), "", " ")
	os.WriteFile(filepath.Join(dir, "truth.json"), b, 0o644)
	return dir
}

// compareJobs checks one seed; it returns the mismatches.
func compareJobs(seed uint64) ([]string, *sim.JobsTruth) {
	r := sim.SimulateJobs(seed)
	truth := r.Truth()
	s, err := verdict.Analyze(history.NewReader(bytes.NewReader(r.Files()), "history.jsonl"))
	if err != nil {
		return []string{"refused: " + err.Error()}, truth
	}
	var ms []string
	add := func(where, field string, want, got any) {
		if fmt.Sprint(want) != fmt.Sprint(got) {
			ms = append(ms, fmt.Sprintf("%s: %s: truth %v, checker %v", where, field, want, got))
		}
	}
	byName := map[string]*verdict.CaseSummary{}
	for i := range s.Cases {
		byName[s.Cases[i].Check.Case] = &s.Cases[i]
	}
	for _, tc := range truth.Cases {
		gc := byName[tc.Name]
		if gc == nil {
			ms = append(ms, fmt.Sprintf("case %s: absent from the checker's summary", tc.Name))
			continue
		}
		r := &gc.Check
		where := "case " + tc.Name
		add(where, "valid", tc.Valid, r.Valid)
		if tc.Valid != r.Valid {
			ms = append(ms, fmt.Sprintf("%s: invalid reasons: truth %q, checker %q", where, tc.Why, r.Invalid))
		}
		add(where, "status", tc.Status, r.Status)
		if tc.Decided != sim.Any {
			add(where, "decided", tc.Decided, r.Decided)
		}
		add(where, "exposures", tc.Exposures, r.Exposures)
		if r.Jobs == nil {
			ms = append(ms, where+": no jobs judged")
			continue
		}
		compareJobFigures(add, where, &tc.Jobs, r.Jobs)
	}
	if len(s.Cases) != len(truth.Cases) {
		add("run", "cases", len(truth.Cases), len(s.Cases))
	}
	if !truth.Compared {
		return ms, truth
	}
	rows := s.JobsRows()
	for _, tr := range truth.Rows {
		where := "row " + tr.Row
		var gr *verdict.JobsRow
		for i := range rows {
			if rows[i].Row == tr.Row {
				gr = &rows[i]
			}
		}
		for _, sr := range s.Rows {
			if sr.Row == tr.Row {
				add(where, "verdict", tr.Verdict, sr.Verdict)
				add(where, "met", tr.Met, sr.Met)
			}
		}
		if gr == nil {
			if tr.Trials > 0 {
				ms = append(ms, where+": no jobs row")
			}
			continue
		}
		add(where, "trials", tr.Trials, gr.Trials)
		add(where, "exposures", tr.Exposures, gr.Exposures)
		add(where, "jobs", tr.Jobs, gr.Jobs)
		add(where, "duplicate_effects", tr.Duplicates, gr.Duplicates)
		add(where, "stale", tr.Stale, gr.Stale)
		add(where, "lost", tr.Lost, gr.Lost)
		compareRate(add, where, "touched_duplicated", tr.TouchedHits, tr.Touched, gr.Touched)
		compareRate(add, where, "jobs_duplicated", tr.DupHits, tr.Jobs, gr.DuplicatedOverall)
	}
	d := verdict.NewJobDecision(s)
	for _, tr := range truth.Decision {
		where := fmt.Sprintf("jobs decision %s on %s", tr.Variant, tr.Backend)
		var gr *verdict.JobRow
		for i := range d.Rows {
			if d.Rows[i].Variant == tr.Variant && d.Rows[i].Backend == tr.Backend {
				gr = &d.Rows[i]
			}
		}
		if gr == nil {
			ms = append(ms, where+": absent")
			continue
		}
		add(where, "control", tr.Control, gr.Control)
		add(where, "no_fault_cases", tr.NoFaultCases, gr.NoFaultCases)
		add(where, "fault_cases", tr.FaultCases, gr.FaultCases)
		for _, x := range []struct {
			f    string
			w, g float64
		}{{"p50", tr.P50, gr.P50Ms}, {"p99", tr.P99, gr.P99Ms}, {"jobs/s", tr.PerSec, gr.PerSec},
			{"fault p50", tr.FP50, gr.FaultP50Ms}, {"fault p99", tr.FP99, gr.FaultP99Ms}, {"fault jobs/s", tr.FPS, gr.FaultPerSec}} {
			if math.Abs(x.w-x.g) > 1e-9*max(1, math.Abs(x.w)) {
				add(where, x.f, x.w, x.g)
			}
		}
		for class, tc := range tr.Cells {
			cw := where + " × " + class
			gc := gr.Cells[class]
			if gc == nil {
				ms = append(ms, cw+": absent")
				continue
			}
			add(cw, "outcome", tc.Outcome, gc.Outcome)
			add(cw, "cases", tc.Cases, gc.Cases)
			add(cw, "invalid", tc.Invalid, gc.Invalid)
			add(cw, "trials", tc.Trials, gc.Trials)
			add(cw, "exposures", tc.Exposures, gc.Exposures)
			add(cw, "phase_exposures", sortedMap(tc.PhaseExposures), sortedMap(gc.PhaseExposures))
			add(cw, "jobs", tc.Jobs, gc.Jobs)
			add(cw, "touched", tc.Touched, gc.Touched)
			add(cw, "duplicates", fmt.Sprint(tc.Duplicates, tc.Concurrent, tc.Sequential, tc.Unsplit), fmt.Sprint(gc.Duplicates, gc.Concurrent, gc.Sequential, gc.Unsplit))
			add(cw, "stale accepted/refused, absorbed", fmt.Sprint(tc.StaleAccepted, tc.StaleRefused, tc.Absorbed), fmt.Sprint(gc.StaleAccepted, gc.StaleRefused, gc.Absorbed))
			add(cw, "lost", tc.Lost, gc.Lost)
			compareRate(add, cw, "touched_duplicated", tc.TouchedHits, tc.Touched, gc.TouchedDuplicated)
			compareRate(add, cw, "jobs_duplicated", tc.DupHits, tc.Jobs, gc.Duplicated)
			compareRate(add, cw, "damage_trials", tc.Damage, tc.DamageN, gc.DamageTrials)
			add(cw, "stuck", fmt.Sprintf("%.6f %d", tc.StuckMaxMs, tc.StuckOpen), fmt.Sprintf("%.6f %d", gc.StuckMaxMs, gc.StuckOpen))
			add(cw, "too_few", tc.TooFew, gc.TooFew)
			add(cw, "vacuous", tc.Vacuous, gc.Vacuous)
		}
		if len(gr.Cells) != len(tr.Cells) {
			add(where, "cells", len(tr.Cells), len(gr.Cells))
		}
	}
	if len(d.Rows) != len(truth.Decision) {
		add("jobs decision", "rows", len(truth.Decision), len(d.Rows))
	}
	return ms, truth
}

func compareRate(add func(where, field string, want, got any), where, field string, hits, of int, g verdict.Rate) {
	add(where, field, fmt.Sprintf("%d of %d", hits, of), fmt.Sprintf("%d of %d", g.Hits, g.Of))
	if of > 0 && g.Of == of {
		lo, hi := verdict.Wilson(hits, of)
		if math.Abs(lo-g.Low) > 1e-9 || math.Abs(hi-g.High) > 1e-9 {
			add(where, field+" interval", fmt.Sprint(lo, hi), fmt.Sprint(g.Low, g.High))
		}
	}
}

func sortedMap(m map[string]int) string {
	var ks []string
	for k, v := range m {
		if v != 0 {
			ks = append(ks, fmt.Sprintf("%s=%d", k, v))
		}
	}
	sort.Strings(ks)
	return strings.Join(ks, " ")
}

func optMs(p *float64) string {
	if p == nil {
		return "none"
	}
	return fmt.Sprintf("%.6f", *p)
}

// compareJobFigures compares one case's job figures (MODEL §20).
func compareJobFigures(add func(where, field string, want, got any), where string, w *sim.JobsTruthFigures, g *checker.Jobs) {
	add(where, "jobs.count/due", fmt.Sprint(w.Count, w.Due), fmt.Sprint(g.Count, g.Due))
	add(where, "jobs.attempts", fmt.Sprint(w.Attempts, w.AttemptsOK, w.AttemptsFailed, w.AttemptsUnknown), fmt.Sprint(g.Attempts, g.AttemptsOK, g.AttemptsFailed, g.AttemptsUnknown))
	add(where, "jobs.effects applied/duplicate/stale", fmt.Sprint(w.Applied, w.RefusedDuplicate, w.RefusedStale), fmt.Sprint(g.Applied, g.RefusedDuplicate, g.RefusedStale))
	add(where, "jobs.duplicates (all, concurrent, sequential, unsplit)", fmt.Sprint(w.Duplicates, w.Concurrent, w.Sequential, w.Unsplit), fmt.Sprint(g.Duplicates, g.Concurrent, g.Sequential, g.Unsplit))
	add(where, "jobs.jobs_duplicated", w.DuplicatedJobs, g.DuplicatedJobs)
	add(where, "jobs.stale_effects_accepted", w.StaleAccepted, g.StaleAccepted)
	add(where, "jobs.lost_jobs", w.Lost, g.Lost)
	add(where, "jobs.touched (jobs, duplicated, lost)", fmt.Sprint(w.Touched, w.TouchedDuplicated, w.TouchedLost), fmt.Sprint(g.Touched, g.TouchedDuplicated, g.TouchedLost))
	add(where, "jobs.touched_phases", sortedMap(w.TouchedPhases), sortedMap(g.TouchedPhases))
	var wf, gf []string
	for _, f := range w.Faults {
		wf = append(wf, fmt.Sprintf("%s aimed=%s %s touched=%d dup=%d", f.Fault, f.Aimed, sortedMap(f.Phases), f.Touched, f.Duplicated))
	}
	for _, f := range g.Faults {
		gf = append(gf, fmt.Sprintf("%s aimed=%s %s touched=%d dup=%d", f.Fault, f.Aimed, sortedMap(f.Phases), f.Touched, f.Duplicated))
	}
	add(where, "jobs.faults", strings.Join(wf, "; "), strings.Join(gf, "; "))
	add(where, "jobs.stuck", fmt.Sprint(w.Stuck, w.StuckOpen, optMs(w.StuckP50Ms), optMs(w.StuckMaxMs)), fmt.Sprint(g.Stuck, g.StuckOpen, optMs(g.StuckP50Ms), optMs(g.StuckMaxMs)))
	add(where, "jobs.effects_after_lost", w.EffectsAfterLost, g.EffectsAfterLost)
	add(where, "jobs.completion p50/p99", optMs(w.LatencyP50Ms)+" "+optMs(w.LatencyP99Ms), optMs(g.LatencyP50Ms)+" "+optMs(g.LatencyP99Ms))
	if math.Abs(w.PerSec-g.PerSec) > 1e-9*max(1, w.PerSec) {
		add(where, "jobs.jobs_per_s", w.PerSec, g.PerSec)
	}
	add(where, "jobs.periods", w.Periodic, g.Periods != nil)
	if !w.Periodic || g.Periods == nil {
		return
	}
	p := g.Periods
	add(where, "jobs.periods.periods_missed", w.PeriodsMissed, p.Missed)
	add(where, "jobs.periods.most_in_one_period", w.MostInPeriod, p.MostInOne)
	add(where, "jobs.periods.delay p50/p99", optMs(w.DelayP50Ms)+" "+optMs(w.DelayP99Ms), optMs(p.DelayP50Ms)+" "+optMs(p.DelayP99Ms))
	add(where, "jobs.periods.tries (all, stale, fresh)", fmt.Sprint(w.Tries, w.ServedStale, w.ServedFresh), fmt.Sprint(p.Tries, p.ServedStale, p.ServedFresh))
	add(where, "jobs.periods.wait p50/p99", optMs(w.WaitP50Ms)+" "+optMs(w.WaitP99Ms), optMs(p.WaitP50Ms)+" "+optMs(p.WaitP99Ms))
}
