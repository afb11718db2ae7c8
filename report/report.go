package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/lockbench/lockbench/checker"
	"github.com/lockbench/lockbench/internal/layout"
)

// WriteAll writes summary.json, report.md and the plots into dir.
func WriteAll(dir string, s *Summary) error {
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
	if err := WriteMatrix(filepath.Join(dir, MatrixPlot), s); err != nil {
		return err
	}
	if err := WriteScatter(filepath.Join(dir, ScatterPlot), s); err != nil {
		return err
	}
	for i := range s.Cases {
		c := &s.Cases[i]
		if len(c.Metrics.wins) > 0 {
			if err := WriteTimeSeries(dir, c); err != nil {
				return err
			}
		}
		if len(c.Metrics.wins) > 0 || c.Check.Violations > 0 {
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
	if err := WriteReport(&md, s); err != nil {
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

// WriteReport writes the human-readable report.
func WriteReport(w io.Writer, s *Summary) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# lockbench report: %s\n\n", s.Scenario)
	fmt.Fprintf(&b, "Seed %d. Each row is one case: a lock backend under one workload and fault schedule. ", s.Seed)
	b.WriteString("*Violations* counts moments when two clients both believed they held the same lock. ")
	b.WriteString("*Lost updates* are writes to the unfenced resource that overwrote another holder's work. ")
	b.WriteString("The fenced resource checks each request's fencing token: *stale rejected* are late writes it stopped, ")
	b.WriteString("*stale accepted* are late writes it let through (damage despite fencing).\n\n")
	b.WriteString("| case | backend | faults | verdict | violations | lost updates | stale rejected | stale accepted | acquires/s | p50 ms | p99 ms | p99.9 ms | max ms | unknown acquires | longest gap ms |\n")
	b.WriteString("|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, c := range s.Cases {
		r, m := c.Check, c.Metrics
		fs := "none"
		if len(r.Meta.Faults) > 0 {
			var names []string
			for _, f := range r.Meta.Faults {
				n := fmt.Sprintf("%s %s", f.Type, f.Target)
				if f.Type == "clock-jump" {
					n += " (emulated)"
				}
				names = append(names, n)
			}
			fs = strings.Join(names, ", ")
		}
		stale := fmt.Sprint(r.Resource.StaleAccepted)
		if !r.Meta.Fenced {
			stale += " (no token)"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %d | %d | %d | %s | %.0f | %.2f | %.2f | %.2f | %.2f | %d | %.0f |\n",
			r.Case, r.Backend, fs, statusWords[r.Status], r.Violations, r.Resource.LostUpdates, r.Resource.StaleRejected, stale,
			m.AcquiresPerSec, m.AcquireLatency.P50, m.AcquireLatency.P99, m.AcquireLatency.P999, m.AcquireLatency.Max,
			m.AcquiresUnknown, m.LongestGapMs)
	}
	if hasTrials(s) {
		b.WriteString("\n## Rows over trials\n\nA row repeats a case because timing makes a single run of a race flaky; it is reproduced when the expected outcome appears in at least *need* trials.\n\n")
		b.WriteString("| row | backend | verdict | met | trials | need | invalid |\n|---|---|---|---:|---:|---:|---:|\n")
		for _, r := range s.Rows {
			fmt.Fprintf(&b, "| %s | %s | %s | %d | %d | %d | %d |\n", r.Row, r.Backend, r.Verdict, r.Met, r.Trials, r.Need, r.Invalid)
		}
	}
	b.WriteString("\n![acquire latency distribution](latency.png)\n\n")
	b.WriteString("![violations by backend and fault](matrix.png)\n\n![latency against safety](scatter.png)\n\n")
	b.WriteString("## Cases\n\n")
	for _, c := range s.Cases {
		r := c.Check
		fmt.Fprintf(&b, "### %s (%s): %s\n\n", r.Case, r.Backend, statusWords[r.Status])
		fmt.Fprintf(&b, "- expected: violations %s, stale writes accepted %s, lost updates %s", yesno(r.Expect.Violations), yesno(r.Expect.StaleAccepted), yesno(r.Expect.LostUpdates))
		if r.Expect.Note != "" {
			fmt.Fprintf(&b, " — %s", r.Expect.Note)
		}
		b.WriteString("\n")
		fmt.Fprintf(&b, "- mutual exclusion: %s (%d violations); resource: %s; %d acquisitions, %d failed, %d unknown; %d releases refused as no longer held; %d leases lost; %d crashes; %d faults fired\n",
			r.MutualExclusion, r.Violations, r.Resource.Verdict, r.AcquiresOK, r.AcquiresFailed, r.AcquiresUnknown, r.ReleasesNotHeld, r.LeasesLost, r.Crashes, r.FaultsFired)
		if !r.Meta.Fenced {
			b.WriteString("- this backend issues no fencing token: the fenced resource cannot tell holders apart\n")
		}
		lin := c.Linearizability
		fmt.Fprintf(&b, "- linearizability of the lock history (porcupine, mutex model per key): %s", lin.Verdict)
		if lin.Fenced != "" {
			fmt.Fprintf(&b, "; fenced model (tokens must grow): %s", lin.Fenced)
		}
		b.WriteString("\n")
		for _, k := range sortedKeys(lin.Info) {
			fmt.Fprintf(&b, "  - key %s: %s — see [%s](%s)\n", k, lin.Keys[k], linViewName(r.Case, k), linViewName(r.Case, k))
		}
		if r.TokenRegressions > 0 {
			fmt.Fprintf(&b, "- **fencing token went backwards** %d times (a counter lost in a failover or restart): the fenced resource then rejects legitimate holders\n", r.TokenRegressions)
		}
		for _, u := range r.Unmet {
			fmt.Fprintf(&b, "- **unmet expectation**: %s\n", u)
		}
		for _, v := range c.Thresholds {
			fmt.Fprintf(&b, "- threshold %s\n", v.String())
		}
		for _, why := range r.Invalid {
			fmt.Fprintf(&b, "- **invalid**: %s\n", why)
		}
		if len(c.Metrics.wins) > 0 {
			fmt.Fprintf(&b, "\n![%s over time](%s.png)\n", r.Case, timeseriesName(r.Case))
		}
		if len(c.Metrics.wins) > 0 || r.Violations > 0 {
			fmt.Fprintf(&b, "\n![who held the lock when](%s.png)\n", timelineName(r.Case))
		}
		if ph := c.Metrics.Phases; len(ph) > 0 {
			b.WriteString("\n| fault | target | phase | seconds | acquisitions | acq/s | failed | unknown | p50 ms | p99 ms | max ms | violations |\n")
			b.WriteString("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
			for _, p := range ph {
				for _, x := range []struct {
					name string
					s    PhaseStats
				}{{"before", p.Before}, {"during", p.During}, {"after", p.After}} {
					fmt.Fprintf(&b, "| %s | %s | %s | %.1f | %d | %.0f | %d | %d | %.2f | %.2f | %.2f | %d |\n", p.Fault, p.Target, x.name,
						x.s.DurationS, x.s.Acquisitions, x.s.AcquiresPerSec, x.s.AcquiresFailed, x.s.AcquiresUnknown, x.s.P50, x.s.P99, x.s.Max, x.s.Violations)
				}
			}
			b.WriteString("\n")
		}
		if len(r.Examples) > 0 {
			b.WriteString("- first violations:\n")
			for _, o := range r.Examples {
				fmt.Fprintf(&b, "  - %s\n", o.Describe())
			}
		}
		b.WriteString("\n")
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
		keys := make([]string, 0, len(s.Versions))
		for k := range s.Versions {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(&b, "- %s: %s\n", k, s.Versions[k])
		}
		b.WriteString("\n")
	}
	b.WriteString("## Re-run\n\n")
	fmt.Fprintf(&b, "Re-check this history: `bench check history.jsonl`. Re-run the scenario with the same seed: see `rerun` in run.json.\n")
	_, err := io.WriteString(w, b.String())
	if err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	return nil
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
		case f.RemainingMs > 0:
			out += fmt.Sprintf(" recovered_after_%s=never", f.Fault)
		}
	}
	return out
}

// Verdict lines for the terminal, one per case.
func (s *Summary) Lines() []string {
	var out []string
	for _, c := range s.Cases {
		r, m := c.Check, c.Metrics
		line := fmt.Sprintf("%-24s %-14s %-34s violations=%d stale_accepted=%d lost=%d stale_rejected=%d token_regressions=%d | acquisitions=%d %s | acq/s=%.0f p99=%.2fms",
			r.Case, r.Backend, statusWords[r.Status], r.Violations, r.Resource.StaleAccepted, r.Resource.LostUpdates, r.Resource.StaleRejected,
			r.TokenRegressions, r.AcquiresOK, availability(r.Liveness), m.AcquiresPerSec, m.AcquireLatency.P99)
		out = append(out, line)
		for _, u := range r.Unmet {
			out = append(out, "    unmet: "+u)
		}
		for _, i := range r.Invalid {
			out = append(out, "    invalid: "+i)
		}
		for _, v := range c.Thresholds {
			out = append(out, "    "+v.String())
		}
	}
	for _, r := range s.Rows {
		if r.Trials > 1 {
			out = append(out, fmt.Sprintf("row %-20s %s: expected outcome in %d/%d trials (need %d), %d invalid", r.Row, r.Verdict, r.Met, r.Trials, r.Need, r.Invalid))
		}
	}
	return out
}

func hasTrials(s *Summary) bool {
	for _, r := range s.Rows {
		if r.Trials > 1 {
			return true
		}
	}
	return false
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
