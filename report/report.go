package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/lockbench/lockbench/checker"
	"github.com/lockbench/lockbench/history"
	"github.com/lockbench/lockbench/internal/layout"
)

// WriteAll writes summary.json, report.md, report.html and the plots
// into dir.
func WriteAll(dir string, s *Summary) error {
	s.Decision = NewDecision(s)
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("encode summary: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, layout.SummaryFile), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write summary: %w", err)
	}
	if err := writeLinearizationViews(dir, s); err != nil {
		return err
	}
	if err := WriteDecisionPlot(filepath.Join(dir, DecisionPlot), s.Decision); err != nil {
		return err
	}
	var pl drawn
	if pl.scatter, err = WriteScatter(filepath.Join(dir, ScatterPlot), s); err != nil {
		return err
	}
	if pl.envelope, err = WriteEnvelopePlot(filepath.Join(dir, EnvelopePlot), s); err != nil {
		return err
	}
	if pl.overlaps, err = WriteOverlapPlot(filepath.Join(dir, OverlapPlot), s); err != nil {
		return err
	}
	for i := range s.Cases {
		c := &s.Cases[i]
		if hasTimeSeries(c) {
			if err := WriteTimeSeries(dir, c); err != nil {
				return err
			}
		}
		if hasTimeline(c) {
			if err := WriteTimeline(dir, c); err != nil {
				return err
			}
		}
	}
	bt, err := os.Create(filepath.Join(dir, layout.BenchFile))
	if err != nil {
		return fmt.Errorf("create bench.txt: %w", err)
	}
	if err := WriteBenchTxt(bt, s); err != nil {
		bt.Close()
		return fmt.Errorf("write bench.txt: %w", err)
	}
	if err := bt.Close(); err != nil {
		return fmt.Errorf("write bench.txt: %w", err)
	}
	if err := WriteLatencyPlot(filepath.Join(dir, LatencyPlot), s); err != nil {
		return err
	}
	var md bytes.Buffer
	if err := writeReport(&md, s, pl); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, layout.ReportFile), md.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	return WriteHTML(dir, md.Bytes(), "lockbench report: "+s.Scenario)
}

func yesno(b *bool) string {
	if b == nil {
		return "—"
	}
	if *b {
		return "yes"
	}
	return "no"
}

var statusWords = map[string]string{
	"ok":             "✓ as expected",
	"violation":      "✗ UNSAFE (unexpected)",
	"unavailable":    "✗ NOT LIVE (unexpected)",
	"not-reproduced": "✗ expected outcome not reproduced",
	"invalid":        "✗ invalid run",
	"unknown":        "? incomplete",
}

// WriteReport writes the human-readable report, with the scatter plot
// when WriteScatter drew one.
func WriteReport(w io.Writer, s *Summary) error {
	return writeReport(w, s, drawn{scatter: len(ScatterPoints(s)) >= 2, envelope: len(Envelope(s)) > 0})
}

// drawn says which of the optional plots were drawn.
type drawn struct{ scatter, envelope, overlaps bool }

// caption writes a figure and the sentence that says how to read it.
func caption(b *strings.Builder, alt, file, text string) {
	fmt.Fprintf(b, "![%s](%s)\n\n*%s*\n\n", alt, file, text)
}

func writeReport(w io.Writer, s *Summary, pl drawn) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# lockbench report: %s\n\n", s.Scenario)
	writeConditions(&b, s)
	if t := s.Tally(); t != "" {
		fmt.Fprintf(&b, "**%s**\n\n", t)
	}
	d := s.Decision
	if d == nil {
		d = NewDecision(s)
	}
	b.WriteString("## Decision view\n\n")
	b.WriteString("Which lock is safe under which class of fault, and what it costs: backends down, the fault classes this run exercised across, each cell summing up every case (and trial) of that backend in that class. " + DecisionLegend + " The last columns are the cost when nothing goes wrong: acquire latency and throughput of the busiest case without faults, and the hand-off latency (a holder's release to the next holder's grant).\n\n")
	if err := d.WriteMarkdown(&b); err != nil {
		return err
	}
	b.WriteString("\n")
	caption(&b, "decision view", DecisionPlot+".png", "The decision view as an image (2× resolution, to paste into a design document): the colour and the words in each cell say the same thing; \"2 holders k/n\" is in how many of the cell's decided trials two clients believed they held the lock, with its 95% interval; a pale cell marked ? rests on fewer than 10 fault exposures; \"during/after\" count acquisitions while the fault was in force and after it healed, \"gap\" is the longest time a client waited with nobody holding the lock.")
	if pl.envelope {
		b.WriteString("## Safety envelope\n\n")
		if err := writeEnvelopeTable(&b, s); err != nil {
			return err
		}
		b.WriteString("\n")
		caption(&b, "safety envelope", EnvelopePlot+".png", "Each line is one backend's case swept over one value (for a pause of the holder: its length as a multiple of the lease): the share of its decided trials in which two clients believed they held the lock at once, and the band its 95% interval (Wilson). Where a line leaves zero is where the backend's lease stops protecting a paused holder; how steeply it rises says how much margin its expiry checks, drift factor or session timeout leave. A wide band means few trials: read the counts in the table.")
	}
	if pl.overlaps {
		caption(&b, "overlap durations", OverlapPlot+".png", "How long two holders coexisted, every overlap of each backend's cases (box: quartiles; whiskers: the range without outliers; log scale): the window in which a late write does damage unless a fencing token or the work itself stops it.")
	}

	b.WriteString("## Safety, case by case\n\n")
	b.WriteString("*Violations* count moments when two clients both believed they held the same lock. *Lost updates* are writes to the unfenced resource that overwrote another holder's work. ")
	b.WriteString("The fenced resource checks each request's fencing token: *stale rejected* are late writes it stopped, *stale accepted* are late writes it let through (damage despite fencing). *Token regressions* count fencing tokens lower than an earlier holder's (the fenced resource then refuses legitimate writes).\n\n")
	if err := WriteSafetyTable(&b, s); err != nil {
		return err
	}
	b.WriteString("\n## Latency and throughput\n\n")
	b.WriteString("Acquire latency runs from the call (in open loop: from when the attempt was due, so a queue behind a slow lock counts) to the grant; it includes the retries and their backoff. ")
	b.WriteString("*Hand-off* is measured only where clients waited for a key: from the holder starting its release to the next holder's grant. *Offered* and *dropped* are for open-loop cases: attempts the schedule made, and those no free client could start on time.\n\n")
	if err := WriteLatencyTable(&b, s); err != nil {
		return err
	}
	b.WriteString("\n")
	caption(&b, "acquire latency by percentile", LatencyPlot+".png", "Acquire latency by percentile, one panel per backend and one line per case, on shared axes: read across a panel for how the tail grows (the x axis counts nines: 90%, 99%, 99.9%), and between panels at the same height to compare backends. A line stops at the highest percentile its samples can support.")
	if pl.scatter {
		caption(&b, "latency against safety", ScatterPlot+".png", "Each backend's p99 acquire latency without faults (x, log scale) against its violations per 1,000 acquisitions in the cases with faults (y): down and to the left is fast and safe. Backends without both a fault-free case and a faulted one are left out.")
	}
	if hasTrials(s) {
		b.WriteString("## Rows over trials\n\nA row repeats a case because timing makes a single run of a race flaky; it is reproduced when the expected outcome appears in at least *need* trials.\n\n")
		b.WriteString("| row | backend | verdict | met | trials | need | invalid | two holders in (95% interval) | longest overlap | longest zombie |\n|---|---|---|---:|---:|---:|---:|---|---:|---:|\n")
		for _, r := range s.Rows {
			fmt.Fprintf(&b, "| %s | %s | %s | %d | %d | %d | %d | %s | %s | %s |\n", r.Row, r.Backend, r.Verdict, r.Met, r.Trials, r.Need, r.Invalid,
				r.TwoHolders, msText(r.OverlapMaxMs), msText(r.ZombieMaxMs))
		}
		b.WriteString("\n")
	}
	b.WriteString("## Cases\n\n")
	for _, c := range s.Cases {
		writeCase(&b, &c)
	}
	if len(s.Warnings) > 0 {
		b.WriteString("## Warnings\n\n")
		for _, w := range s.Warnings {
			fmt.Fprintf(&b, "- %s\n", w)
		}
		b.WriteString("\n")
	}
	if len(s.Versions) > 0 {
		b.WriteString("## Versions\n\n")
		for _, k := range slices.Sorted(maps.Keys(s.Versions)) {
			fmt.Fprintf(&b, "- %s: %s\n", k, s.Versions[k])
		}
		b.WriteString("\n")
	}
	b.WriteString("## Re-run\n\n")
	fmt.Fprintf(&b, "Re-check this history: `bench check history.jsonl`; regenerate this report from it: `bench report .`. Re-run the scenario with the same seed: see `rerun` in run.json.\n")
	_, err := io.WriteString(w, b.String())
	if err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	return nil
}

// WriteSafetyTable writes the safety columns of every case of the
// summaries, one row per case.
func WriteSafetyTable(w io.Writer, sums ...*Summary) error {
	t := Table{Header: []string{"case", "backend", "faults", "verdict", "violations", "lost updates", "stale rejected", "stale accepted", "token regressions", "acquisitions", "unknown acquires", "longest gap ms"},
		Right: rightFrom(4, 12)}
	for _, s := range sums {
		for _, c := range s.Cases {
			r := c.Check
			stale := fmt.Sprint(r.Resource.StaleAccepted)
			if !r.Meta.Fenced {
				stale += " (no token)"
			}
			t.Add(r.Case, r.Backend, faultsText(r.Meta), statusWords[r.Status], fmt.Sprint(r.Violations), fmt.Sprint(r.Resource.LostUpdates),
				fmt.Sprint(r.Resource.StaleRejected), stale, fmt.Sprint(r.TokenRegressions), fmt.Sprint(r.AcquiresOK), fmt.Sprint(r.AcquiresUnknown),
				fmt.Sprintf("%.0f", r.Liveness.LongestGapMs))
		}
	}
	return t.Write(w)
}

// WriteLatencyTable writes the latency and throughput of every case of
// the summaries: the load, achieved and offered rates, drops, acquire
// latency percentiles and hand-off latency.
func WriteLatencyTable(w io.Writer, sums ...*Summary) error {
	t := Table{Header: []string{"case", "backend", "load", "acq/s", "offered/s", "dropped", "p50 ms", "p99 ms", "p99.9 ms", "max ms", "hand-off p50 ms", "hand-off p99 ms"},
		Right: rightFrom(3, 12)}
	for _, s := range sums {
		for _, c := range s.Cases {
			r, m := c.Check, c.Metrics
			loop := "closed"
			offered, dropped := "—", "—"
			if m.OfferedPerSec > 0 {
				loop = "open"
				offered, dropped = fmt.Sprintf("%.0f", m.OfferedPerSec), fmt.Sprint(m.Dropped)
			}
			load := fmt.Sprintf("%s, %d clients, %d key%s", loop, r.Meta.Clients, r.Meta.Keys, plural(r.Meta.Keys))
			hp50, hp99 := "—", "—"
			if m.Handoff.Count > 0 {
				hp50, hp99 = fmt.Sprintf("%.2f", m.Handoff.P50), fmt.Sprintf("%.2f", m.Handoff.P99)
			}
			t.Add(r.Case, r.Backend, load, fmt.Sprintf("%.0f", m.AcquiresPerSec), offered, dropped,
				fmt.Sprintf("%.2f", m.AcquireLatency.P50), fmt.Sprintf("%.2f", m.AcquireLatency.P99), fmt.Sprintf("%.2f", m.AcquireLatency.P999),
				fmt.Sprintf("%.2f", m.AcquireLatency.Max), hp50, hp99)
		}
	}
	return t.Write(w)
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// hasTimeline says whether a case gets a holder timeline: it had faults or
// violations, and somebody held the lock at all.
func hasTimeline(c *CaseSummary) bool {
	return len(c.Metrics.spans) > 0 && (len(c.Metrics.wins) > 0 || c.Check.Violations > 0)
}

// faultsText names a case's faults (and client misuse) for a table.
func faultsText(m history.CaseMeta) string {
	var names []string
	for _, f := range m.Faults {
		names = append(names, fmt.Sprintf("%s %s", f.Type, f.Target))
	}
	names = append(names, m.Misuse...)
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// writeCase writes one case's section.
func writeCase(b *strings.Builder, c *CaseSummary) {
	r := c.Check
	fmt.Fprintf(b, "### %s (%s): %s\n\n", r.Case, r.Backend, statusWords[r.Status])
	fmt.Fprintf(b, "- expected: violations %s, stale writes accepted %s, lost updates %s", yesno(r.Expect.Violations), yesno(r.Expect.StaleAccepted), yesno(r.Expect.LostUpdates))
	if r.Expect.Note != "" {
		fmt.Fprintf(b, " — %s", r.Expect.Note)
	}
	b.WriteString("\n")
	fmt.Fprintf(b, "- mutual exclusion: %s (%d violations); resource: %s; %d acquisitions, %d failed, %d unknown; %d releases refused as no longer held; %d leases lost; %d crashes; %d faults fired\n",
		r.MutualExclusion, r.Violations, r.Resource.Verdict, r.AcquiresOK, r.AcquiresFailed, r.AcquiresUnknown, r.ReleasesNotHeld, r.LeasesLost, r.Crashes, r.FaultsFired)
	fmt.Fprintf(b, "- availability: %s\n", availability(r.Liveness))
	if st := r.Store; st != nil {
		fmt.Fprintf(b, "- the work ran in the backend's own database: %s; %d increments committed, %d conflicts (each retried), %d rolled back by a refused commit, %d cut short, %d unknown; the counters read at the end: %d increments lost, %d never committed\n",
			st.Verdict, st.Committed, st.Conflicts, st.RolledBack, st.CutShort, st.Unknown, st.Lost, st.Phantom)
	}
	switch {
	case r.Meta.Lockless:
		b.WriteString("- this entry takes no lock: clients overlap by design, and only the database's counters say whether work was lost\n")
	case r.Meta.Store:
		b.WriteString("- this entry's work commits with its lock: no fencing token is needed, the database refuses what a dead holder did\n")
	case !r.Meta.Fenced:
		b.WriteString("- this backend issues no fencing token: the fenced resource cannot tell holders apart\n")
	}
	lin := c.Linearizability
	fmt.Fprintf(b, "- linearizability of the lock history (porcupine, mutex model per key): %s", lin.Verdict)
	if lin.Fenced != "" {
		fmt.Fprintf(b, "; fenced model (tokens must grow): %s", lin.Fenced)
	}
	b.WriteString("\n")
	for _, k := range slices.Sorted(maps.Keys(lin.Info)) {
		fmt.Fprintf(b, "  - key %s: %s — see [%s](%s)\n", k, lin.Keys[k], linViewName(r.Case, k), linViewName(r.Case, k))
	}
	if r.TokenRegressions > 0 {
		fmt.Fprintf(b, "- **fencing token went backwards** %d times (a counter lost in a failover or restart): the fenced resource then rejects legitimate holders\n", r.TokenRegressions)
	}
	for _, u := range r.Unmet {
		fmt.Fprintf(b, "- **unmet expectation**: %s\n", u)
	}
	for _, v := range c.Thresholds {
		fmt.Fprintf(b, "- threshold %s\n", v.String())
	}
	for _, why := range r.Invalid {
		fmt.Fprintf(b, "- **invalid**: %s\n", why)
	}
	b.WriteString("\n")
	if hasTimeSeries(c) {
		caption(b, r.Case+" over time", timeseriesName(r.Case)+".png", "Acquisitions per second (top) and the slowest acquisition of each 250 ms (bottom) over the whole case, fault windows shaded: a zero rate is a time nobody acquired the lock, and the latency line breaks there.")
	}
	if hasTimeline(c) {
		caption(b, "who held the lock when", timelineName(r.Case)+".png", "Who believed they held one key when: one lane per client, a bar per hold, red where two holds overlap; × marks a write the fencing token refused, a red ▲ a late write that landed. Faults shaded.")
	}
	if ph := c.Metrics.Phases; len(ph) > 0 {
		b.WriteString("| fault | target | phase | seconds | acquisitions | acq/s | failed | unknown | p50 ms | p99 ms | max ms | violations |\n")
		b.WriteString("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
		for _, p := range ph {
			for _, x := range []struct {
				name string
				s    PhaseStats
			}{{"before", p.Before}, {"during", p.During}, {"after", p.After}} {
				fmt.Fprintf(b, "| %s | %s | %s | %.1f | %d | %.0f | %d | %d | %.2f | %.2f | %.2f | %d |\n", p.Fault, p.Target, x.name,
					x.s.DurationS, x.s.Acquisitions, x.s.AcquiresPerSec, x.s.AcquiresFailed, x.s.AcquiresUnknown, x.s.P50, x.s.P99, x.s.Max, x.s.Violations)
			}
		}
		b.WriteString("\n")
	}
	if len(r.Examples) > 0 {
		b.WriteString("- first violations:\n")
		for _, o := range r.Examples {
			fmt.Fprintf(b, "  - %s\n", o.Describe())
		}
	}
	b.WriteString("\n")
}

// Verdicts counts rows by verdict.
func (s *Summary) Verdicts() map[string]int {
	out := map[string]int{}
	for _, r := range s.Rows {
		out[r.Verdict]++
	}
	return out
}

// availability says in a few words how live the lock was: the longest
// stretch without any acquisition, and how soon it recovered after each
// fault healed.
func availability(l checker.Liveness) string {
	out := fmt.Sprintf("longest_gap=%.0fms", l.LongestGapMs)
	for _, f := range l.Faults {
		switch {
		case f.RecoveredAfterMs >= 0:
			out += fmt.Sprintf(" recovered_after_%s=%.0fms", f.Fault, f.RecoveredAfterMs)
		case f.Verdict == checker.Unmet:
			out += fmt.Sprintf(" recovered_after_%s=never", f.Fault)
		}
	}
	return out
}

// Verdict lines for the terminal, one per case.
func (s *Summary) Lines() []string {
	var out []string
	for _, c := range s.Cases {
		out = append(out, CaseLines(c)...)
	}
	for _, r := range s.Rows {
		if r.Trials > 1 {
			out = append(out, fmt.Sprintf("row %-20s %s: expected outcome in %d/%d trials (need %d), %d invalid", r.Row, r.Verdict, r.Met, r.Trials, r.Need, r.Invalid))
		}
	}
	return out
}

// CaseLines is one case's verdict line, with its unmet expectations,
// invalid reasons and thresholds under it.
func CaseLines(c CaseSummary) []string {
	r, m := c.Check, c.Metrics
	out := []string{fmt.Sprintf("%-24s %-14s %-34s violations=%d stale_accepted=%d lost=%d stale_rejected=%d token_regressions=%d | acquisitions=%d %s | acq/s=%.0f p99=%.2fms",
		r.Case, r.Backend, statusWords[r.Status], r.Violations, r.Resource.StaleAccepted, r.Resource.LostUpdates, r.Resource.StaleRejected,
		r.TokenRegressions, r.AcquiresOK, availability(r.Liveness), m.AcquiresPerSec, m.AcquireLatency.P99)}
	for _, u := range r.Unmet {
		out = append(out, "    unmet: "+u)
	}
	for _, i := range r.Invalid {
		out = append(out, "    invalid: "+i)
	}
	for _, v := range c.Thresholds {
		out = append(out, "    "+v.String())
	}
	return out
}

// Tally sums the run up in one line: rows by verdict.
func (s *Summary) Tally() string {
	v := s.Verdicts()
	if len(s.Rows) == 0 {
		return ""
	}
	parts := []string{fmt.Sprintf("%d as expected", v["ok"]+v["reproduced"])}
	for _, k := range []string{"violation", "unavailable", "not-reproduced", "invalid"} {
		if v[k] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", v[k], k))
		}
	}
	if n := s.ThresholdsFailed(); n > 0 {
		parts = append(parts, fmt.Sprintf("%d threshold(s) failed", n))
	}
	return fmt.Sprintf("%d row(s) from %d case(s): %s", len(s.Rows), len(s.Cases), strings.Join(parts, ", "))
}

func hasTrials(s *Summary) bool {
	for _, r := range s.Rows {
		if r.Trials > 1 {
			return true
		}
	}
	return false
}
