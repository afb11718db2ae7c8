package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/lockbench/lockbench/internal/cluster"
	"github.com/lockbench/lockbench/internal/exitcode"
	"github.com/lockbench/lockbench/internal/layout"
	"github.com/lockbench/lockbench/report"
	"github.com/lockbench/lockbench/verdict"
)

func tableCmd() *command {
	c := newCommand("table", "RESULTS_DIR...", "print one table over several results folders (known answers, decision view, safety, latency)", 1, -1)
	c.long = `Re-checks the history of each folder and prints one aligned Markdown
table over all of them:
  -view known     one row per scenario row: verdict over trials, counts,
                  the versions of the servers the row's cases started
                  (docs/known-answers.md's table); exit 102 if a row
                  was not reproduced
  -view decision  backends × fault classes (the report's decision view)
  -view safety    every case's safety counts
  -view latency   every case's throughput, latency, hand-off latency and barges`
	view := c.fs.String("view", "known", "known, decision, safety or latency")
	c.exec = func(_ context.Context, cio cmdIO, args []string) error {
		var sums []*verdict.Summary
		// A folder named twice (results/latest beside the folder it links
		// to) is one run: its trials are counted once.
		var dirs []string
		seen := map[string]bool{}
		for _, dir := range args {
			real, err := filepath.EvalSymlinks(dir)
			if err == nil {
				real, err = filepath.Abs(real)
			}
			if err != nil {
				real = dir
			}
			if seen[real] {
				fmt.Fprintf(cio.stderr, "bench table: %s is a folder already given: counted once\n", dir)
				continue
			}
			seen[real] = true
			dirs = append(dirs, dir)
		}
		args = dirs
		for _, dir := range args {
			sum, err := verdict.AnalyzeDir(dir)
			if err != nil {
				return exitcode.With(fmt.Errorf("%s: %w", dir, err), exitcode.Config)
			}
			sums = append(sums, sum)
		}
		switch *view {
		case "known":
			return knownTable(cio.stdout, args, sums)
		case "decision":
			return report.WriteDecisionMarkdown(cio.stdout, verdict.NewDecision(sums...))
		case "safety":
			return report.WriteSafetyTable(cio.stdout, sums...)
		case "latency":
			return report.WriteLatencyTable(cio.stdout, sums...)
		}
		return exitcode.With(fmt.Errorf("-view %q: want known, decision, safety or latency", *view), exitcode.Config)
	}
	return c
}

// knownTable prints one row per scenario row: the known-answer table.
// The versions column names the servers the row's own cases started
// (run.json records each case's server kinds); a results folder from
// before that was recorded lists every server of its run.
func knownTable(w io.Writer, dirs []string, sums []*verdict.Summary) error {
	t := report.Table{Header: []string{"row", "backend", "verdict", "expected outcome in", "two holders in (95%)", "violations", "stale rejected", "stale accepted", "token regressions", "versions"},
		Right: []bool{false, false, false, false, false, true, true, true, true, false}}
	var failed int
	for i, sum := range sums {
		info, _ := layout.ReadRun(dirs[i]) // none: versions unknown
		for _, r := range sum.Rows {
			var viol, rej, acc, regr int
			var names []string
			for _, c := range sum.Cases {
				m := c.Check.Meta
				if m.Row == r.Row || (m.Row == "" && m.Name == r.Row) {
					viol += c.Check.Violations
					rej += c.Check.Resource.StaleRejected
					acc += c.Check.Resource.StaleAccepted
					regr += c.Check.TokenRegressions
					names = append(names, m.Name)
				}
			}
			if r.Verdict != verdict.RowReproduced {
				failed++
			}
			t.Add(r.Row, r.Backend, string(r.Verdict), fmt.Sprintf("%d/%d trials (need %d)", r.Met, r.Trials, r.Need), r.TwoHolders.String(),
				fmt.Sprint(viol), fmt.Sprint(rej), fmt.Sprint(acc), fmt.Sprint(regr), serverVersions(info, names))
		}
	}
	if err := t.Write(w); err != nil {
		return err
	}
	if failed > 0 {
		return exitcode.With(fmt.Errorf("%d row(s) not reproduced", failed), exitcode.NotReproduced)
	}
	return nil
}

// serverVersions lists the versions of the servers the named cases of a
// run started: every server of the run when the cases' servers were not
// recorded; "?" without a run.json.
func serverVersions(run *layout.Run, cases []string) string {
	if run == nil {
		return "?"
	}
	kinds, recorded := map[string]bool{}, false
	for _, c := range run.Cases {
		if slices.Contains(cases, c.Name) && c.Servers != nil {
			recorded = true
			for _, k := range c.Servers {
				kinds[k] = true
			}
		}
	}
	seen := map[string]bool{}
	var out []string
	for k, v := range run.Versions {
		kind, isServer := strings.CutSuffix(k, "-server")
		if !isServer || (recorded && !kinds[kind]) {
			continue
		}
		if sv := cluster.ShortVersion(kind, v); !seen[sv] {
			seen[sv] = true
			out = append(out, sv)
		}
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}
