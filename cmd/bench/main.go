// Command bench benchmarks and chaos-tests distributed lock algorithms.
//
//	bench run [flags] SCENARIO.yaml   run a scenario, write a results folder
//	bench check HISTORY.jsonl         re-check a stored history, print verdicts
//	bench list [DIR]                  list backends, faults and scenario files
//	bench table DIR...                rows of results folders as a Markdown table
//	bench worker                      (internal) one application instance
//
// Exit codes are documented in package exitcode and the README: 0 ok,
// 1 harness error, 99 threshold failed, 100 unexpected safety violation, 101 invalid run,
// 102 expected violation not reproduced, 104 bad usage or config,
// 105 interrupted.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/pprof"
	"sort"
	"strings"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/faults"
	"github.com/lockbench/lockbench/internal/exitcode"
	"github.com/lockbench/lockbench/internal/layout"
	"github.com/lockbench/lockbench/internal/runner"
	"github.com/lockbench/lockbench/internal/scenario"
	"github.com/lockbench/lockbench/internal/worker"
	"github.com/lockbench/lockbench/report"
)

const usage = `bench: benchmark and chaos-test distributed locks

Usage:
  bench run [flags] SCENARIO.yaml   run a scenario and write a results folder
  bench check HISTORY.jsonl         re-check a stored history and print the verdicts
  bench list [SCENARIO_DIR]         list backends, fault types and scenario files
  bench table RESULTS_DIR...        print the rows of results folders as a Markdown table
  bench compare OLD NEW             compare two results folders (or folders of repeated runs)

Run 'bench run -h' for the run flags.

Exit codes:
  0   every case valid and as expected
  1   harness error (a server would not start, a missing binary, I/O)
  99  a threshold failed (after every safety expectation held)
  100 safety violation where the scenario expected none
  101 invalid run (no work done, a fault never fired, history cut short)
  102 an expected outcome did not appear (known answer not reproduced)
  103 the lock was not live as the scenario expects (never recovered, gaps)
  104 bad usage or invalid scenario
  105 interrupted (SIGINT/SIGTERM); everything was torn down
`

func main() {
	ctx, stop := signalContext()
	stopProfile := profile()
	err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stopProfile()
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
	}
	os.Exit(int(exitcode.Of(err)))
}

// run dispatches a subcommand. It is the whole CLI, testable in process.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitcode.With(errors.New("no command given"), exitcode.Config)
	}
	switch args[0] {
	case "run":
		return cmdRun(ctx, args[1:], stdout, stderr)
	case "check":
		return cmdCheck(args[1:], stdout, stderr)
	case "list":
		return cmdList(args[1:], stdout)
	case "table":
		return cmdTable(args[1:], stdout)
	case "compare":
		return cmdCompare(args[1:], stdout, stderr)
	case "perf":
		return cmdPerf(ctx, args[1:], stdout, stderr)
	case "worker":
		return worker.Run(ctx, stdin, stdout, stderr)
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprint(stderr, usage)
	return exitcode.With(fmt.Errorf("unknown command %q", args[0]), exitcode.Config)
}

type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

func cmdRun(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("o", envOr("RESULTS_DIR", "results"), "folder under which the run's results folder is created (env RESULTS_DIR)")
	dir := fs.String("dir", "", "exact results folder to write (overrides -o); refused if it holds files, unless -clean")
	clean := fs.Bool("clean", false, "with -dir: remove what the folder holds before the run")
	seed := fs.Int64("seed", 0, "override the scenario's seed (replays a run's workload choices and fault schedule)")
	var only listFlag
	fs.Var(&only, "case", "run only this case (repeatable)")
	quiet := fs.Bool("q", false, "print only the verdicts")
	fs.Usage = func() {
		fmt.Fprint(stderr, "Usage: bench run [flags] SCENARIO.yaml\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return exitcode.With(err, exitcode.Config)
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return exitcode.With(errors.New("run takes exactly one scenario file"), exitcode.Config)
	}
	sc, err := scenario.Load(fs.Arg(0))
	if err != nil {
		return exitcode.With(err, exitcode.Config)
	}
	opts := runner.Options{ResultsRoot: *out, Dir: *dir, Clean: *clean, Only: only, Log: stderr}
	if *quiet {
		opts.Log = io.Discard
	} else if isTerminal(stderr) {
		opts.Progress = stderr // a live status line; CI logs (not a terminal) stay quiet
		opts.Log = clearLine{stderr}
	}
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "seed" {
			opts.Seed = seed
		}
	})
	if opts.Seed != nil {
		// The fault schedule is part of what a seed replays.
		if err := sc.Reseed(*opts.Seed); err != nil {
			return exitcode.With(err, exitcode.Config)
		}
	}
	outcome, err := runner.Run(ctx, sc, opts)
	if outcome == nil {
		return err
	}
	// Whatever happened, judge what was recorded: a partial results folder
	// still says what the run saw before it stopped.
	sum, aerr := analyseRun(outcome)
	if sum != nil {
		for _, l := range sum.Lines() {
			fmt.Fprintln(stdout, l)
		}
	}
	fmt.Fprintf(stdout, "results: %s\n", outcome.Dir)
	if err != nil {
		return err
	}
	if aerr != nil {
		return aerr
	}
	return verdictError(sum)
}

// analyseRun checks the history a run recorded and writes its summary,
// report and plots into the results folder.
func analyseRun(o *runner.Outcome) (*report.Summary, error) {
	sum, err := report.AnalyzeFile(filepath.Join(o.Dir, layout.HistoryFile))
	if err != nil {
		return nil, err
	}
	sum.Scenario, sum.Seed, sum.RunID = o.Info.Scenario, o.Info.Seed, o.Info.RunID
	sum.Versions = o.Info.Versions
	if err := report.WriteAll(o.Dir, sum); err != nil {
		return sum, err
	}
	return sum, nil
}

// verdictError turns row verdicts (a case over its trials) into the run's
// exit code: a safety violation outranks an invalid run, which outranks a
// lock that was not live, which outranks a known answer that was not
// reproduced.
func verdictError(s *report.Summary) error {
	v := s.Verdicts()
	switch {
	case v["violation"] > 0:
		return exitcode.With(fmt.Errorf("%d case(s) violated safety where the scenario expected none", v["violation"]), exitcode.Violation)
	case v["invalid"] > 0:
		return exitcode.With(fmt.Errorf("%d case(s) invalid or incomplete: their verdicts are not evidence", v["invalid"]), exitcode.Invalid)
	case v["unavailable"] > 0:
		return exitcode.With(fmt.Errorf("%d case(s) were not live as the scenario expects", v["unavailable"]), exitcode.Unavailable)
	case v["not-reproduced"] > 0:
		return exitcode.With(fmt.Errorf("%d case(s) did not show the outcome the scenario expects", v["not-reproduced"]), exitcode.NotReproduced)
	case s.ThresholdsFailed() > 0:
		return exitcode.With(fmt.Errorf("%d threshold(s) failed", s.ThresholdsFailed()), exitcode.Threshold)
	}
	return nil
}

func cmdCheck(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	jsonOut := fs.Bool("json", false, "print summary.json instead of the verdict lines")
	if err := fs.Parse(args); err != nil {
		return exitcode.With(err, exitcode.Config)
	}
	if fs.NArg() != 1 {
		return exitcode.With(errors.New("usage: bench check [-json] HISTORY.jsonl"), exitcode.Config)
	}
	path := fs.Arg(0)
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		path = filepath.Join(path, layout.HistoryFile)
	}
	sum, err := report.AnalyzeFile(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return exitcode.With(err, exitcode.Config)
		}
		return exitcode.With(fmt.Errorf("check %s: %w", path, err), exitcode.Config)
	}
	for _, w := range sum.Warnings {
		fmt.Fprintln(stderr, "warning:", w)
	}
	if *jsonOut {
		if err := writeJSON(stdout, sum); err != nil {
			return err
		}
	} else {
		for _, l := range sum.Lines() {
			fmt.Fprintln(stdout, l)
		}
	}
	return verdictError(sum)
}

func cmdList(args []string, stdout io.Writer) error {
	dir := "scenarios"
	if len(args) > 0 {
		dir = args[0]
	}
	fmt.Fprintln(stdout, "backends:")
	for _, b := range backends.All() {
		mark := ""
		if b.Unsafe {
			mark = " [known-unsafe control]"
		}
		fmt.Fprintf(stdout, "  %-14s %s%s\n", b.Name, b.Summary, mark)
	}
	fmt.Fprintln(stdout, "faults:")
	for _, f := range faults.All() {
		var kinds []string
		for _, k := range f.Targets {
			kinds = append(kinds, string(k))
		}
		fmt.Fprintf(stdout, "  %-14s %s (targets: %s)\n", f.Name, f.Summary, strings.Join(kinds, ", "))
	}
	fmt.Fprintf(stdout, "scenarios (%s):\n", dir)
	var files []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && (strings.HasSuffix(p, ".yaml") || strings.HasSuffix(p, ".yml")) {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		return exitcode.With(fmt.Errorf("list scenarios: %w", err), exitcode.Config)
	}
	sort.Strings(files)
	for _, f := range files {
		desc := ""
		if sc, err := scenario.Load(f); err == nil {
			desc = fmt.Sprintf("%d case(s)", len(sc.Cases))
			if sc.Description != "" {
				desc += ": " + firstLine(sc.Description)
			}
		} else {
			desc = "INVALID: run `bench run` on it for details"
		}
		fmt.Fprintf(stdout, "  %-32s %s\n", f, desc)
	}
	return nil
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// cmdTable re-checks the history of each results folder and prints one
// Markdown row per scenario row: the known-answer table of the README.
func cmdTable(args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return exitcode.With(errors.New("usage: bench table RESULTS_DIR..."), exitcode.Config)
	}
	fmt.Fprintln(stdout, "| row | backend | verdict | expected outcome in | violations | stale rejected | stale accepted | token regressions | versions |")
	fmt.Fprintln(stdout, "|---|---|---|---|---:|---:|---:|---:|---|")
	var failed int
	for _, dir := range args {
		sum, err := report.AnalyzeFile(filepath.Join(dir, layout.HistoryFile))
		if err != nil {
			return exitcode.With(fmt.Errorf("%s: %w", dir, err), exitcode.Config)
		}
		vers := runVersions(dir)
		for _, r := range sum.Rows {
			var viol, rej, acc, regr int
			for _, c := range sum.Cases {
				m := c.Check.Meta
				if m.Row == r.Row || (m.Row == "" && m.Name == r.Row) {
					viol += c.Check.Violations
					rej += c.Check.Resource.StaleRejected
					acc += c.Check.Resource.StaleAccepted
					regr += c.Check.TokenRegressions
				}
			}
			if r.Verdict != "reproduced" {
				failed++
			}
			fmt.Fprintf(stdout, "| %s | %s | %s | %d/%d trials (need %d) | %d | %d | %d | %d | %s |\n",
				r.Row, r.Backend, r.Verdict, r.Met, r.Trials, r.Need, viol, rej, acc, regr, vers)
		}
	}
	if failed > 0 {
		return exitcode.With(fmt.Errorf("%d row(s) not reproduced", failed), exitcode.NotReproduced)
	}
	return nil
}

// runVersions lists the server versions recorded in a results folder.
func runVersions(dir string) string {
	b, err := os.ReadFile(filepath.Join(dir, layout.RunFile))
	if err != nil {
		return "?"
	}
	var info struct {
		Versions map[string]string `json:"versions"`
	}
	if json.Unmarshal(b, &info) != nil {
		return "?"
	}
	seen := map[string]bool{}
	var out []string
	for k, v := range info.Versions {
		if sv := shortVersion(v); strings.HasSuffix(k, "-server") && !seen[sv] {
			seen[sv] = true
			out = append(out, sv)
		}
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}

// shortVersion trims a server's version banner to name and number.
func shortVersion(v string) string {
	f := strings.Fields(v)
	switch {
	case len(f) >= 3 && f[0] == "Redis":
		return "redis " + strings.TrimPrefix(f[2], "v=")
	case len(f) >= 3 && f[0] == "postgres":
		return "postgresql " + f[2]
	case len(f) >= 3 && f[0] == "etcd":
		return "etcd " + f[2]
	case len(f) >= 2 && f[0] == "Consul":
		return "consul " + strings.TrimPrefix(f[1], "v")
	}
	return v
}

// cmdCompare compares two results folders, or two folders of repeated runs,
// benchstat style, and fails on a significant regression beyond the noise
// floor (99) or on any safety count rising from zero (100).
func cmdCompare(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("compare", flag.ContinueOnError)
	fs.SetOutput(stderr)
	alpha := fs.Float64("alpha", report.DefaultCompareOptions.Alpha, "significance level of the Mann-Whitney U test")
	noise := fs.Float64("noise", report.DefaultCompareOptions.NoiseFloor*100, "noise floor in percent: smaller changes never fail")
	if err := fs.Parse(args); err != nil {
		return exitcode.With(err, exitcode.Config)
	}
	if fs.NArg() != 2 || *alpha <= 0 || *alpha >= 1 || *noise < 0 {
		return exitcode.With(errors.New("usage: bench compare [-alpha 0.05] [-noise 10] OLD NEW (results folders, or folders of results folders)"), exitcode.Config)
	}
	old, err := report.LoadSet(fs.Arg(0))
	if err != nil {
		return exitcode.With(err, exitcode.Config)
	}
	cur, err := report.LoadSet(fs.Arg(1))
	if err != nil {
		return exitcode.With(err, exitcode.Config)
	}
	for _, set := range [][]*report.Summary{old, cur} {
		for _, s := range set {
			if v := s.Verdicts(); v["invalid"] > 0 {
				return exitcode.With(fmt.Errorf("run %s has invalid cases: it cannot be a baseline or a candidate", s.RunID), exitcode.Invalid)
			}
		}
	}
	c := report.Compare(old, cur, report.CompareOptions{Alpha: *alpha, NoiseFloor: *noise / 100})
	if len(c.Deltas) == 0 {
		return exitcode.With(errors.New("the two sets have no case in common"), exitcode.Config)
	}
	if err := c.Write(stdout); err != nil {
		return err
	}
	perf, safety := c.Regressions()
	switch {
	case safety > 0:
		return exitcode.With(fmt.Errorf("%d safety count(s) went from zero to non-zero", safety), exitcode.Violation)
	case perf > 0:
		return exitcode.With(fmt.Errorf("%d significant regression(s) beyond the %.0f%% noise floor", perf, *noise), exitcode.Threshold)
	}
	return nil
}

// flagError turns a flag parsing error into the CLI's: -h is not an error.
func flagError(err error) error {
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	return exitcode.With(err, exitcode.Config)
}

// profile writes a CPU profile of this process (coordinator or worker) into
// $LOCKBENCH_CPUPROFILE_DIR when it is set: how `make perf` findings are
// explained. It returns how to stop it.
func profile() func() {
	dir := os.Getenv("LOCKBENCH_CPUPROFILE_DIR")
	if dir == "" {
		return func() {}
	}
	name := "coordinator"
	if len(os.Args) > 1 && os.Args[1] == "worker" {
		name = "worker"
	}
	f, err := os.Create(filepath.Join(dir, fmt.Sprintf("%s-%d.prof", name, os.Getpid())))
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench: cpu profile:", err)
		return func() {}
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		fmt.Fprintln(os.Stderr, "bench: cpu profile:", err)
		f.Close()
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}
}
