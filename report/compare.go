package report

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/perf/benchmath"

	"github.com/lockbench/lockbench/internal/layout"
	"github.com/lockbench/lockbench/verdict"
)

// CompareOptions configure Compare.
type CompareOptions struct {
	// Alpha is the significance level of the Mann-Whitney U test (0.05).
	Alpha float64
	// NoiseFloor is the smallest relative change (0.10 = 10%) that can
	// fail a comparison: statistically significant is not the same as
	// large, and this machine is shared and noisy.
	NoiseFloor float64
}

// DefaultCompareOptions are benchstat's alpha and a 10% noise floor.
var DefaultCompareOptions = CompareOptions{Alpha: 0.05, NoiseFloor: 0.10}

// Delta is one metric of one case compared between two sets of runs.
type Delta struct {
	Case     string   `json:"case"`
	Metric   string   `json:"metric"`
	OldN     int      `json:"old_n"`
	NewN     int      `json:"new_n"`
	Old      float64  `json:"old_median"`
	New      float64  `json:"new_median"`
	OldRange string   `json:"old_ci"` // ± as benchstat prints it
	NewRange string   `json:"new_ci"`
	Change   string   `json:"change"` // "+12.30%" or "~" when not significant
	P        float64  `json:"p"`
	Verdict  string   `json:"verdict"` // ok, regression, improvement, safety-regression
	Warnings []string `json:"warnings,omitempty"`
}

// Comparison is the result of comparing two sets of runs.
type Comparison struct {
	OldRuns int `json:"old_runs"`
	NewRuns int `json:"new_runs"`
	// MinP is the smallest p-value the Mann-Whitney U test can give with
	// this many runs a side: when it is not below alpha, no change can be
	// significant, however large.
	MinP  float64 `json:"min_p"`
	Alpha float64 `json:"alpha"`
	// Warnings about the comparison as a whole (too few runs), said once.
	Warnings []string `json:"warnings,omitempty"`
	// Unverified counts performance changes beyond the noise floor in the
	// bad direction that could not be tested for lack of runs.
	Unverified int     `json:"unverified"`
	Deltas     []Delta `json:"deltas"`
}

// minP is the smallest two-sided p-value of a Mann-Whitney U test with
// samples of n1 and n2: 2 / C(n1+n2, n1).
func minP(n1, n2 int) float64 {
	if n1 == 0 || n2 == 0 {
		return 1
	}
	c := 1.0
	for i := 1; i <= n1; i++ {
		c = c * float64(n2+i) / float64(i)
	}
	return math.Min(1, 2/c)
}

// RunsNeeded is the fewest runs a side (equal sides) for a change to be
// able to reach significance at alpha.
func RunsNeeded(alpha float64) int {
	for n := 1; n < 100; n++ {
		if minP(n, n) < alpha {
			return n
		}
	}
	return 100
}

// Regressions counts performance and safety regressions.
func (c *Comparison) Regressions() (perf, safety int) {
	for _, d := range c.Deltas {
		switch d.Verdict {
		case "regression":
			perf++
		case "safety-regression":
			safety++
		}
	}
	return perf, safety
}

type cmpMetric struct {
	name          string
	lowerIsBetter bool
	safety        bool // any rise from zero fails, whatever the statistics
	// get returns the case's value, and false when it has none (a
	// latency with no sample: MODEL §15): such a run is no sample.
	get func(c *verdict.CaseSummary) (float64, bool)
}

func always(get func(c *verdict.CaseSummary) float64) func(c *verdict.CaseSummary) (float64, bool) {
	return func(c *verdict.CaseSummary) (float64, bool) { return get(c), true }
}

var cmpMetrics = []cmpMetric{
	{"acquire_p50_ms", true, false, func(c *verdict.CaseSummary) (float64, bool) {
		return c.Metrics.AcquireLatency.P50, c.Metrics.AcquireLatency.Count > 0
	}},
	{"acquire_p99_ms", true, false, func(c *verdict.CaseSummary) (float64, bool) {
		return c.Metrics.AcquireLatency.P99, c.Metrics.AcquireLatency.Count > 0
	}},
	{"acquires_per_s", false, false, always(func(c *verdict.CaseSummary) float64 { return c.Metrics.AcquiresPerSec })},
	{"violations", true, true, always(func(c *verdict.CaseSummary) float64 { return float64(c.Check.Violations) })},
	{"stale_writes_accepted", true, true, always(func(c *verdict.CaseSummary) float64 { return float64(c.Check.Resource.StaleAccepted) })},
	{"lost_updates", true, true, always(func(c *verdict.CaseSummary) float64 { return float64(c.Check.Resource.LostUpdates) })},
}

// Compare compares every case present in both sets, metric by metric, like
// benchstat: medians with confidence intervals, a Mann-Whitney U test, and
// "~" when the difference is not significant. A performance metric
// regresses only when the change is significant and beyond the noise floor
// in the bad direction; too few samples give a warning, never a failure. A
// safety count (violations, stale writes accepted, lost updates) that goes
// from zero in every old run to non-zero in any new run always fails.
func Compare(old, new []*verdict.Summary, opt CompareOptions) *Comparison {
	th := benchmath.DefaultThresholds
	th.CompareAlpha = opt.Alpha
	byCase := func(set []*verdict.Summary) map[string][]*verdict.CaseSummary {
		out := map[string][]*verdict.CaseSummary{}
		for _, s := range set {
			for i := range s.Cases {
				c := &s.Cases[i]
				out[c.Check.Case] = append(out[c.Check.Case], c)
			}
		}
		return out
	}
	oc, nc := byCase(old), byCase(new)
	var names []string
	for name := range oc {
		if _, ok := nc[name]; ok {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	res := &Comparison{OldRuns: len(old), NewRuns: len(new), MinP: minP(len(old), len(new)), Alpha: opt.Alpha}
	if res.MinP >= opt.Alpha {
		res.Warnings = append(res.Warnings, fmt.Sprintf("TOO FEW RUNS: %d old and %d new; with fewer than %d a side no change can be significant at alpha=%.2f (the smallest p possible is %.3f), so every performance row reads ~ however large the change. Repeat the runs (bench compare takes folders of runs).",
			len(old), len(new), RunsNeeded(opt.Alpha), opt.Alpha, res.MinP))
	}
	for _, name := range names {
		for _, m := range cmpMetrics {
			ov, nv := values(oc[name], m.get), values(nc[name], m.get)
			os, ns := benchmath.NewSample(ov, &th), benchmath.NewSample(nv, &th)
			osum := benchmath.AssumeNothing.Summary(os, 0.95)
			nsum := benchmath.AssumeNothing.Summary(ns, 0.95)
			cmp := benchmath.AssumeNothing.Compare(os, ns)
			d := Delta{Case: name, Metric: m.name, OldN: len(ov), NewN: len(nv), Old: osum.Center, New: nsum.Center,
				OldRange: osum.PctRangeString(), NewRange: nsum.PctRangeString(), Change: cmp.FormatDelta(osum.Center, nsum.Center), P: cmp.P, Verdict: "ok"}
			seen := map[string]bool{}
			for _, w := range append(append(osum.Warnings, nsum.Warnings...), cmp.Warnings...) {
				if !seen[w.Error()] {
					seen[w.Error()] = true
					d.Warnings = append(d.Warnings, w.Error())
				}
			}
			if m.safety {
				if maxOf(ov) == 0 && maxOf(nv) > 0 {
					d.Verdict = "safety-regression"
				}
				res.Deltas = append(res.Deltas, d)
				continue
			}
			rel := 0.0
			if osum.Center != 0 {
				rel = (nsum.Center - osum.Center) / math.Abs(osum.Center)
			}
			worse := rel > 0
			if !m.lowerIsBetter {
				worse = rel < 0
			}
			if res.MinP >= opt.Alpha && worse && math.Abs(rel) >= opt.NoiseFloor {
				d.Verdict = "unverified"
				d.Change = fmt.Sprintf("%+.0f%%?", 100*rel)
				res.Unverified++
			}
			if cmp.P < cmp.Alpha && osum.Center != 0 {
				switch {
				case math.Abs(rel) < opt.NoiseFloor:
				case worse:
					d.Verdict = "regression"
				default:
					d.Verdict = "improvement"
				}
			}
			res.Deltas = append(res.Deltas, d)
		}
	}
	return res
}

func values(cs []*verdict.CaseSummary, get func(*verdict.CaseSummary) (float64, bool)) []float64 {
	out := make([]float64, 0, len(cs))
	for _, c := range cs {
		if v, ok := get(c); ok {
			out = append(out, v)
		}
	}
	return out
}

func maxOf(v []float64) float64 {
	m := 0.0
	for _, x := range v {
		m = math.Max(m, x)
	}
	return m
}

// Write prints the comparison grouped by metric, benchstat style: one
// table per metric, a row per case, footnotes numbered once per distinct
// text, and the warnings about the whole comparison first and last.
func (c *Comparison) Write(w io.Writer) error {
	var b strings.Builder
	for _, wn := range c.Warnings {
		fmt.Fprintf(&b, "WARNING: %s\n\n", wn)
	}
	noteIdx := map[string]int{}
	var notes []string
	var metrics []string
	rows := map[string][]Delta{}
	for _, d := range c.Deltas {
		if _, ok := rows[d.Metric]; !ok {
			metrics = append(metrics, d.Metric)
		}
		rows[d.Metric] = append(rows[d.Metric], d)
	}
	for _, m := range metrics {
		t := Table{Header: []string{m, "old", "±", "new", "±", "change", "p (n)", "verdict"}, Right: []bool{false, true, true, true, true, true, true, false}}
		for _, d := range rows[m] {
			verdict := d.Verdict
			if len(d.Warnings) > 0 {
				text := strings.Join(d.Warnings, "; ")
				i, ok := noteIdx[text]
				if !ok {
					notes = append(notes, text)
					i = len(notes)
					noteIdx[text] = i
				}
				verdict += fmt.Sprintf(" (%d)", i)
			}
			t.Add(d.Case, fmt.Sprintf("%.3f", d.Old), d.OldRange, fmt.Sprintf("%.3f", d.New), d.NewRange, d.Change, fmt.Sprintf("%.3f (%d+%d)", d.P, d.OldN, d.NewN), verdict)
		}
		if err := t.Write(&b); err != nil {
			return err
		}
		b.WriteString("\n")
	}
	for i, n := range notes {
		fmt.Fprintf(&b, "(%d) %s\n", i+1, n)
	}
	if c.Unverified > 0 {
		fmt.Fprintf(&b, "\nWARNING: %d change(s) beyond the noise floor in the bad direction are marked unverified: with %d+%d runs they cannot be tested. They do not fail the comparison; more runs (or -min-runs in a gate) would.\n", c.Unverified, c.OldRuns, c.NewRuns)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// LoadSet reads the summaries of a results folder, or of every results
// folder directly inside dir (a set of repeated runs).
func LoadSet(dir string) ([]*verdict.Summary, error) {
	read := func(p string) (*verdict.Summary, error) {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		var s verdict.Summary
		if err := json.Unmarshal(b, &s); err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		return &s, nil
	}
	if _, err := os.Stat(filepath.Join(dir, layout.SummaryFile)); err == nil {
		s, err := read(filepath.Join(dir, layout.SummaryFile))
		if err != nil {
			return nil, err
		}
		return []*verdict.Summary{s}, nil
	}
	matches, err := filepath.Glob(filepath.Join(dir, "*", layout.SummaryFile))
	if err != nil {
		return nil, err
	}
	if len(matches) == 0 {
		return nil, fmt.Errorf("%s: no %s in it or in its subfolders", dir, layout.SummaryFile)
	}
	sort.Strings(matches)
	var out []*verdict.Summary
	for _, m := range matches {
		s, err := read(m)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// WriteBenchTxt writes the summary in the Go benchmark format, so that stock
// benchstat can compare results folders too:
//
//	BenchmarkLock/case=redis/backend=redis  <acquisitions>  <mean acquire ns> ns/op  <acq/s> acquires/s ...
func WriteBenchTxt(w io.Writer, s *verdict.Summary) error {
	var b strings.Builder
	b.WriteString("pkg: lockbench\n")
	for _, u := range []string{"violations", "stale-accepted", "lost-updates"} {
		fmt.Fprintf(&b, "Unit %s assume=exact\n", u)
	}
	for _, c := range s.Cases {
		m := c.Metrics
		if m.Acquisitions == 0 {
			continue
		}
		fmt.Fprintf(&b, "BenchmarkLock/case=%s/backend=%s %d %.0f ns/op %.2f acquires/s %.0f p50-ns %.0f p99-ns %d violations %d stale-accepted %d lost-updates\n",
			c.Check.Case, c.Check.Backend, m.Acquisitions, m.AcquireLatency.Mean*1e6, m.AcquiresPerSec,
			m.AcquireLatency.P50*1e6, m.AcquireLatency.P99*1e6, c.Check.Violations, c.Check.Resource.StaleAccepted, c.Check.Resource.LostUpdates)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
