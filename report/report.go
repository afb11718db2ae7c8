package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/lockbench/lockbench/checker"
	"github.com/lockbench/lockbench/history"
	"github.com/lockbench/lockbench/internal/layout"
	"github.com/lockbench/lockbench/verdict"
)

// MaxFeatured bounds the cases whose own figures (time series, holder
// timeline) the report draws and embeds: a sweep of hundreds of trials
// must still give a page that opens at once.
const MaxFeatured = 24

// Featured picks the cases whose own figures the report shows: every case
// that is not as expected, then, for each backend, its trial with the
// longest overlap of two holders and its slowest one (p99 acquire
// latency), then, for each backend still without one, a representative
// case (its first) — at most MaxFeatured, in that order.
func Featured(s *verdict.Summary) map[int]bool {
	out := map[int]bool{}
	add := func(i int) {
		if i >= 0 && len(out) < MaxFeatured {
			out[i] = true
		}
	}
	for i, c := range s.Cases {
		if c.Check.Status != checker.StatusOK {
			add(i)
		}
	}
	type best struct{ overlap, slow, first int }
	byBackend := map[string]*best{}
	var order []string
	for i, c := range s.Cases {
		b := byBackend[c.Check.Backend]
		if b == nil {
			b = &best{overlap: -1, slow: -1, first: i}
			byBackend[c.Check.Backend] = b
			order = append(order, c.Check.Backend)
		}
		if c.Check.OverlapMaxMs > 0 && (b.overlap < 0 || c.Check.OverlapMaxMs > s.Cases[b.overlap].Check.OverlapMaxMs) {
			b.overlap = i
		}
		if c.Metrics.AcquireLatency.Count > 0 && (b.slow < 0 || c.Metrics.AcquireLatency.P99 > s.Cases[b.slow].Metrics.AcquireLatency.P99) {
			b.slow = i
		}
	}
	for _, name := range order {
		add(byBackend[name].overlap)
	}
	for _, name := range order {
		add(byBackend[name].slow)
	}
	for _, name := range order {
		b := byBackend[name]
		if !out[b.overlap] && !out[b.slow] {
			add(b.first)
		}
	}
	return out
}

// WriteAll writes summary.json, report.md, report.html and the plots
// into dir: the run's own figures, and those of its featured cases (see
// Featured), so that report.html stays a few MB however many trials the
// run holds. WriteAllFigures draws every case's.
func WriteAll(dir string, s *verdict.Summary) error { return writeAll(dir, s, false) }

// WriteAllFigures is WriteAll with every case's own figures drawn, as
// files beside the report; the featured ones are embedded in it, the
// others linked.
func WriteAllFigures(dir string, s *verdict.Summary) error { return writeAll(dir, s, true) }

func writeAll(dir string, s *verdict.Summary, every bool) error {
	s.Decision = verdict.NewDecision(s)
	if jd := verdict.NewJobDecision(s); len(jd.Rows) > 0 {
		s.JobDecision = jd
	}
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
	var pl drawn
	if pl.figs, err = drawFigures(dir, s); err != nil {
		return err
	}
	pl.featured, pl.every = Featured(s), every
	for i := range s.Cases {
		c := &s.Cases[i]
		if !pl.featured[i] && !every {
			continue
		}
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

// expected says what a case expects of one outcome: yes, no, any (not
// promised either way) or — (not judged).
func expected(e history.Expectation, name string, b *bool) string {
	if e.IsAny(name) {
		return "any"
	}
	return yesno(b)
}

// drawn says which of the run's figures were drawn (by name), and which
// cases' own figures: the featured ones, embedded; with every, the others
// too, linked.
type drawn struct {
	figs     map[string]bool
	featured map[int]bool
	every    bool
}

// caption writes a figure and the sentence that says how to read it.
func caption(b *strings.Builder, alt, file, text string) {
	fmt.Fprintf(b, "![%s](%s)\n\n*%s*\n\n", alt, file, text)
}

func writeReport(w io.Writer, s *verdict.Summary, pl drawn) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# lockbench report: %s\n\n", s.Scenario)
	writeConditions(&b, s)
	if t := s.Tally(); t != "" {
		fmt.Fprintf(&b, "**%s**\n\n", t)
	}
	d := s.Decision
	if d == nil {
		d = verdict.NewDecision(s)
	}
	jd := s.JobDecision
	if jd == nil {
		jd = verdict.NewJobDecision(s)
	}
	if len(jd.Rows) > 0 {
		b.WriteString("## Jobs decision view\n\n")
		b.WriteString("Which way of running a job takes effect exactly once under which class of fault, and what it costs (checker/MODEL.md §21): job strategies down, the fault classes across, each cell summing up every case (and trial) of that strategy in that class, judged from the effect sink's own record. " + JobDecisionLegend + "\n\n")
		if err := WriteJobDecisionMarkdown(&b, jd); err != nil {
			return err
		}
		b.WriteString("\n")
		writeFigures(&b, SlotJobs, pl.figs)
	}
	if len(d.Rows) > 0 || len(jd.Rows) == 0 {
		b.WriteString("## Decision view\n\n")
		b.WriteString("Which lock is safe under which class of fault, and what it costs: backends down, the fault classes this run exercised across, each cell summing up every case (and trial) of that backend in that class. " + DecisionLegend + " The last columns are the cost when nothing goes wrong: acquire latency and throughput of the busiest case without faults, and the hand-off latency (a holder's release to the next holder's grant).\n\n")
		if err := WriteDecisionMarkdown(&b, d); err != nil {
			return err
		}
		b.WriteString("\n")
		writeFigures(&b, SlotDecision, pl.figs)
	}
	if pl.figs[EnvelopePlot] {
		b.WriteString("## Safety envelope\n\n")
		if err := writeEnvelopeTable(&b, s); err != nil {
			return err
		}
		b.WriteString("\n")
		writeFigures(&b, SlotEnvelope, pl.figs)
	}
	writeFigures(&b, SlotSafety, pl.figs)

	b.WriteString("## Safety, case by case\n\n")
	b.WriteString("*Violations* count moments when two clients both believed they held the same lock. *Lost updates* are writes to the unfenced resource that overwrote another holder's work. ")
	b.WriteString("The fenced resource checks each request's fencing token: *stale rejected* are late writes it stopped, *stale accepted* are late writes it let through (damage despite fencing). *Token regressions* count fencing tokens lower than an earlier holder's (the fenced resource then refuses legitimate writes).\n\n")
	if err := WriteSafetyTable(&b, s); err != nil {
		return err
	}
	b.WriteString("\n## Latency and throughput\n\n")
	b.WriteString("Acquire latency runs from the call (in open loop: from when the attempt was due, so a queue behind a slow lock counts) to the grant; it includes the retries and their backoff. ")
	b.WriteString("*Hand-off* is measured only where clients waited for a key: from the holder starting its release to the next holder's grant. When the releaser itself got the key straight back, that is a *barge*, counted but not timed (it would time the releaser's next hold, not the hand-over); many barges say the lock is not fair to waiters. *Offered* and *dropped* are for open-loop cases: attempts the schedule made, and those no free client could start on time.\n\n")
	if err := WriteLatencyTable(&b, s); err != nil {
		return err
	}
	b.WriteString("\n")
	writeFigures(&b, SlotLatency, pl.figs)
	if hasTrials(s) {
		b.WriteString("## Rows over trials\n\nA row repeats a case because timing makes a single run of a race flaky; it is reproduced when the expected outcome appears in at least *need* trials.\n\n")
		b.WriteString("| row | backend | verdict | met | trials | need | invalid | two holders in (95% interval) | longest overlap | longest zombie |\n|---|---|---|---:|---:|---:|---:|---|---:|---:|\n")
		for _, r := range s.Rows {
			fmt.Fprintf(&b, "| %s | %s | %s | %d | %d | %d | %d | %s | %s | %s |\n", r.Row, r.Backend, r.Verdict, r.Met, r.Trials, r.Need, r.Invalid,
				r.TwoHoldersText(), msText(r.OverlapMaxMs), msText(r.ZombieMaxMs))
		}
		b.WriteString("\n")
	}
	b.WriteString("## Cases\n\n")
	if n := len(pl.featured); n < len(s.Cases) {
		fmt.Fprintf(&b, "Figures of their own are drawn for %d of the %d cases: every case that is not as expected, and for each backend its trial with the longest overlap, its slowest, or a representative one. `bench report -all-figures .` draws every case's beside this report.\n\n", n, len(s.Cases))
	}
	for i, c := range s.Cases {
		writeCase(&b, &c, figures{embed: pl.featured[i], link: pl.every && !pl.featured[i]})
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
func WriteSafetyTable(w io.Writer, sums ...*verdict.Summary) error {
	t := Table{Header: []string{"case", "backend", "faults", "verdict", "violations", "lost updates", "stale rejected", "stale accepted", "token regressions", "acquisitions", "unknown acquires", "longest gap ms"},
		Right: rightFrom(4, 12)}
	for _, s := range sums {
		for _, c := range s.Cases {
			r := c.Check
			stale := fmt.Sprint(r.Resource.StaleAccepted)
			if !r.Meta.Fenced {
				stale += " (no token)"
			}
			t.Add(r.Case, r.Backend, faultsText(r.Meta), verdict.StatusWords(r.Status), verdict.ViolationsText(r), verdict.LostText(r),
				fmt.Sprint(r.Resource.StaleRejected), stale, fmt.Sprint(r.TokenRegressions), fmt.Sprint(r.AcquiresOK), fmt.Sprint(r.AcquiresUnknown),
				fmt.Sprintf("%.0f", r.Liveness.LongestGapMs))
		}
	}
	return t.Write(w)
}

// WriteLatencyTable writes the latency and throughput of every case of
// the summaries: the load, achieved and offered rates, drops, acquire
// latency percentiles, hand-off latency and hand-off barges.
func WriteLatencyTable(w io.Writer, sums ...*verdict.Summary) error {
	t := Table{Header: []string{"case", "backend", "load", "acq/s", "offered/s", "dropped", "p50 ms", "p99 ms", "p99.9 ms", "max ms", "hand-off p50 ms", "hand-off p99 ms", "barges"},
		Right: rightFrom(3, 13)}
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
			// MODEL §15: a latency with no sample has no value, never 0.
			p50, p99, p999, pmax := "—", "—", "—", "—"
			if l := m.AcquireLatency; l.Count > 0 {
				p50, p99, p999, pmax = fmt.Sprintf("%.2f", l.P50), fmt.Sprintf("%.2f", l.P99), fmt.Sprintf("%.2f", l.P999), fmt.Sprintf("%.2f", l.Max)
			}
			hp50, hp99 := "—", "—"
			if m.Handoff.Count > 0 {
				hp50, hp99 = fmt.Sprintf("%.2f", m.Handoff.P50), fmt.Sprintf("%.2f", m.Handoff.P99)
			}
			t.Add(r.Case, r.Backend, load, fmt.Sprintf("%.0f", m.AcquiresPerSec), offered, dropped, p50, p99, p999, pmax, hp50, hp99, fmt.Sprint(m.HandoffBarges))
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
func hasTimeline(c *verdict.CaseSummary) bool {
	tl := c.Metrics.Timeline()
	return len(tl.Spans) > 0 && (len(tl.Windows) > 0 || c.Check.Violations > 0)
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

// figures says how a case's own figures appear in its section: embedded,
// linked as files beside the report, or not at all.
type figures struct{ embed, link bool }

// writeCase writes one case's section.
func writeCase(b *strings.Builder, c *verdict.CaseSummary, fig figures) {
	r := c.Check
	fmt.Fprintf(b, "### %s (%s): %s\n\n", r.Case, r.Backend, verdict.StatusWords(r.Status))
	e := r.Expect
	fmt.Fprintf(b, "- expected: violations %s, stale writes accepted %s, lost updates %s", expected(e, "violations", e.Violations), expected(e, "stale_writes_accepted", e.StaleAccepted), expected(e, "lost_updates", e.LostUpdates))
	if r.Expect.Note != "" {
		fmt.Fprintf(b, " — %s", r.Expect.Note)
	}
	b.WriteString("\n")
	fmt.Fprintf(b, "- mutual exclusion: %s (%s violations); resource: %s; %d acquisitions, %d failed, %d unknown; %d releases refused as no longer held; %d leases lost; %d crashes; %d faults fired\n",
		r.MutualExclusion, verdict.ViolationsText(r), r.Resource.Verdict, r.AcquiresOK, r.AcquiresFailed, r.AcquiresUnknown, r.ReleasesNotHeld, r.LeasesLost, r.Crashes, r.FaultsFired)
	fmt.Fprintf(b, "- availability: %s\n", verdict.Availability(r.Liveness))
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
	switch {
	case fig.embed:
		if hasTimeSeries(c) {
			caption(b, r.Case+" over time", timeseriesName(r.Case)+".png", "Acquisitions per second (top) and the slowest acquisition of each 250 ms (bottom) over the whole case, fault windows shaded: a zero rate is a time nobody acquired the lock, and the latency line breaks there.")
		}
		if hasTimeline(c) {
			caption(b, "who held the lock when", timelineName(r.Case)+".png", "Who believed they held one key when: one lane per client, a bar per hold, red where two holds overlap; × marks a write the fencing token refused, a red ▲ a late write that landed. Faults shaded.")
		}
	case fig.link:
		var links []string
		if hasTimeSeries(c) {
			links = append(links, fmt.Sprintf("[over time](%s.png)", url.PathEscape(timeseriesName(r.Case))))
		}
		if hasTimeline(c) {
			links = append(links, fmt.Sprintf("[who held the lock when](%s.png)", url.PathEscape(timelineName(r.Case))))
		}
		if len(links) > 0 {
			fmt.Fprintf(b, "- figures: %s\n\n", strings.Join(links, ", "))
		}
	}
	if ph := c.Metrics.Phases; len(ph) > 0 {
		b.WriteString("| fault | target | phase | seconds | acquisitions | acq/s | failed | unknown | p50 ms | p99 ms | max ms | violations |\n")
		b.WriteString("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
		for _, p := range ph {
			for _, x := range []struct {
				name string
				s    checker.PhaseStats
			}{{"before", p.Before}, {"during", p.During}, {"after", p.After}} {
				lat := "— | — | —"
				if x.s.Max != nil {
					lat = fmt.Sprintf("%.2f | %.2f | %.2f", *x.s.P50, *x.s.P99, *x.s.Max)
				}
				fmt.Fprintf(b, "| %s | %s | %s | %.1f | %d | %.0f | %d | %d | %s | %d |\n", p.Fault, p.Target, x.name,
					x.s.DurationS, x.s.Acquisitions, x.s.AcquiresPerSec, x.s.AcquiresFailed, x.s.AcquiresUnknown, lat, x.s.Violations)
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

func hasTrials(s *verdict.Summary) bool {
	for _, r := range s.Rows {
		if r.Trials > 1 {
			return true
		}
	}
	return false
}
