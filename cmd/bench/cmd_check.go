package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/lockbench/lockbench/internal/exitcode"
	"github.com/lockbench/lockbench/internal/layout"
	"github.com/lockbench/lockbench/report"
	"github.com/lockbench/lockbench/verdict"
)

func checkCmd() *command {
	c := newCommand("check", "HISTORY.jsonl|RESULTS_DIR", "re-check a stored history and print the verdicts", 1, 1)
	c.long = `Replays a history (a results folder's history.jsonl, or any JSON Lines
history) through the checker and prints one verdict line per case, with
the same exit code the run had. Unset expectations take the documented
defaults, so a stored history gets the verdict its run got.`
	jsonOut := c.fs.Bool("json", false, "print summary.json instead of the verdict lines")
	c.exec = func(_ context.Context, cio cmdIO, args []string) error {
		sum, err := analyzePath(args[0])
		if err != nil {
			return err
		}
		for _, w := range sum.Warnings {
			fmt.Fprintln(cio.stderr, "warning:", w)
		}
		if *jsonOut {
			sum.Decision = verdict.NewDecision(sum)
			if err := writeJSON(cio.stdout, sum); err != nil {
				return err
			}
		} else {
			for _, l := range sum.Lines() {
				fmt.Fprintln(cio.stdout, l)
			}
			fmt.Fprintln(cio.stdout, sum.Tally())
		}
		return verdictError(sum)
	}
	return c
}

// analyzePath checks a results folder (with its run.json) or a history
// file.
func analyzePath(path string) (*verdict.Summary, error) {
	var (
		sum *verdict.Summary
		err error
	)
	if st, serr := os.Stat(path); serr == nil && st.IsDir() {
		sum, err = verdict.AnalyzeDir(path)
		path = filepath.Join(path, layout.HistoryFile)
	} else {
		sum, err = verdict.AnalyzeFile(path)
	}
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, exitcode.With(err, exitcode.Config)
		}
		return nil, exitcode.With(fmt.Errorf("check %s: %w", path, err), exitcode.Config)
	}
	return sum, nil
}

func reportCmd() *command {
	c := newCommand("report", "RESULTS_DIR...", "regenerate summary, report and plots of results folders from their histories", 1, -1)
	c.long = `Re-checks each folder's history.jsonl (with its run.json) and rewrites
summary.json, report.md, report.html, bench.txt and every plot, as the run
would write them with this version of lockbench (each case's own figures
for the cases the report features; with -all-figures for every case, the
others linked beside it). The exit code is the worst verdict over the
folders.`
	all := c.fs.Bool("all-figures", false, "draw every case's own figures (time series, holder timeline), not only the featured cases'")
	c.exec = func(_ context.Context, cio cmdIO, args []string) error {
		var worst error
		for _, dir := range args {
			if st, err := os.Stat(dir); err != nil || !st.IsDir() {
				return exitcode.With(fmt.Errorf("%s: not a results folder", dir), exitcode.Config)
			}
			sum, err := verdict.AnalyzeDir(dir)
			if err != nil {
				return exitcode.With(fmt.Errorf("%s: %w", dir, err), exitcode.Config)
			}
			write := report.WriteAll
			if *all {
				write = report.WriteAllFigures
			}
			if err := write(dir, sum); err != nil {
				return fmt.Errorf("%s: %w", dir, err)
			}
			fmt.Fprintf(cio.stdout, "%s: %s; open %s\n", dir, sum.Tally(), filepath.Join(dir, report.ReportHTML))
			if err := verdictError(sum); err != nil && (worst == nil || exitcode.Of(err) > exitcode.Of(worst)) {
				worst = err
			}
		}
		return worst
	}
	return c
}

func indexCmd() *command {
	c := newCommand("index", "[RESULTS_ROOT]", "write index.html over the results folders under a folder (default results)", 0, 1)
	c.exec = func(_ context.Context, cio cmdIO, args []string) error {
		root := envOr("RESULTS_DIR", "results")
		if len(args) == 1 {
			root = args[0]
		}
		if err := report.WriteIndex(root); err != nil {
			return exitcode.With(err, exitcode.Config)
		}
		fmt.Fprintln(cio.stdout, filepath.Join(root, report.IndexHTML))
		return nil
	}
	return c
}
