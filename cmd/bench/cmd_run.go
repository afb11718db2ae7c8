package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/lockbench/lockbench/internal/cluster"
	"github.com/lockbench/lockbench/internal/layout"
	"github.com/lockbench/lockbench/internal/targets"
	"github.com/lockbench/lockbench/verdict"

	"github.com/lockbench/lockbench/history"
	"github.com/lockbench/lockbench/internal/exitcode"
	"github.com/lockbench/lockbench/internal/realized"
	"github.com/lockbench/lockbench/internal/runner"
	"github.com/lockbench/lockbench/internal/scenario"
	"github.com/lockbench/lockbench/report"
)

type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

func runCmd() *command {
	c := newCommand("run", "SCENARIO.yaml", "run a scenario and write a results folder", 1, 1)
	c.long = `Validates the scenario (nothing starts if it is invalid), then runs each case
on a local cluster of real servers, records every event in history.jsonl,
checks it and writes summary.json, report.md, report.html and the plots.
The last lines printed are a tally and the results folder ("open
<folder>/report.html"). The exit code says the worst verdict (bench -h).`
	out := c.fs.String("o", envOr("RESULTS_DIR", "results"), "folder under which the run's results folder is created (env RESULTS_DIR)")
	dir := c.fs.String("dir", "", "exact results folder to write (overrides -o); refused if it holds files, unless -clean")
	clean := c.fs.Bool("clean", false, "with -dir: remove what the folder holds before the run")
	seed := c.fs.Int64("seed", 0, "override the scenario's seed (replays a run's workload choices and fault schedule)")
	var only listFlag
	c.fs.Var(&only, "case", "run only this case (repeatable)")
	quiet := c.fs.Bool("q", false, "print only the verdicts")
	network := c.fs.String("network", "", "override the scenario's network: loopback, or hosts (each server and instance in a network namespace of its own; root)")
	targetsFile := c.fs.String("targets", "", "run against existing servers named in this targets file instead of starting local ones (credentials from the environment only)")
	shared := c.fs.Bool("shared-results", false, "make the results folder readable by every user of the machine (0755, files 0644); by default it is yours alone (0700, files 0600)")
	var comp composeFlags
	comp.define(c.fs)
	c.exec = func(ctx context.Context, cio cmdIO, args []string) error {
		layout.Shared = *shared
		so, err := scenarioOptions(*network, *targetsFile, comp)
		if err != nil {
			return err
		}
		sc, err := scenario.LoadWith(args[0], so)
		if err != nil {
			return exitcode.With(err, exitcode.Config)
		}
		opts := runner.Options{ResultsRoot: *out, Dir: *dir, Clean: *clean, Only: only, Log: cio.stderr}
		if *quiet {
			opts.Log = io.Discard
		} else if isTerminal(cio.stderr) {
			opts.Progress = cio.stderr // a live status line; CI logs (not a terminal) stay quiet
			opts.Log = clearLine{cio.stderr}
		}
		if !*quiet {
			// Each case's verdict as soon as it is judged: the same line
			// as the final table's, so a long run shows where it stands.
			opts.OnCase = func(b []byte) {
				st := verdict.NewStream()
				r := history.NewReader(bytes.NewReader(b), "history")
				for r.Next() {
					if _, err := st.Add(r.Event()); err != nil {
						return
					}
				}
				for _, cs := range st.Summary().Cases {
					for _, l := range verdict.CaseLines(cs) {
						fmt.Fprintln(opts.Log, "  "+l)
					}
				}
			}
		}
		c.fs.Visit(func(f *flag.Flag) {
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
		// Whatever happened, judge what was recorded: a partial results
		// folder still says what the run saw before it stopped.
		sum, aerr := analyseRun(outcome.Dir)
		if sum != nil {
			for _, l := range sum.Lines() {
				fmt.Fprintln(cio.stdout, l)
			}
			fmt.Fprintln(cio.stdout, sum.Tally())
		}
		if *dir == "" {
			if ierr := report.WriteIndex(*out); ierr != nil {
				fmt.Fprintln(cio.stderr, "warning:", ierr)
			}
		}
		if serr := layout.Seal(outcome.Dir); serr != nil {
			fmt.Fprintln(cio.stderr, "warning: results modes:", serr)
		}
		fmt.Fprintf(cio.stdout, "results: %s (open %s)\n", outcome.Dir, filepath.Join(outcome.Dir, report.ReportHTML))
		if err != nil {
			return err
		}
		if aerr != nil {
			return aerr
		}
		return verdictError(sum)
	}
	return c
}

// composeFlags point the harness at a running compose topology.
type composeFlags struct{ file, project, image *string }

func (f *composeFlags) define(fs *flag.FlagSet) {
	f.file = fs.String("compose", "", "with -targets: the docker compose file of the topology the targets are services of; lockbench may then pause, kill, restart and cut them, and runs its worker instances as containers on its network")
	f.project = fs.String("compose-project", "lockbench", "the compose project name of that topology")
	f.image = fs.String("worker-image", "lockbench/bench:local", "the image of the worker containers (make compose-images builds it)")
}

// scenarioOptions reads the options shared by run and validate.
func scenarioOptions(network, targetsFile string, comp composeFlags) (scenario.Options, error) {
	o := scenario.Options{Network: network}
	if comp.file != nil && *comp.file != "" {
		o.Compose = &scenario.Compose{File: *comp.file, Project: *comp.project, WorkerImage: *comp.image}
	}
	if targetsFile != "" {
		t, err := targets.Load(targetsFile, cluster.CredentialFamilies())
		if err != nil {
			return o, exitcode.With(err, exitcode.Config)
		}
		o.Targets = t
	}
	return o, nil
}

// analyseRun checks the history of a results folder and writes its
// summary, report and plots into it.
func analyseRun(dir string) (*verdict.Summary, error) {
	sum, err := verdict.AnalyzeDir(dir)
	if err != nil {
		return nil, err
	}
	if err := report.WriteAll(dir, sum); err != nil {
		return sum, err
	}
	// Every results folder carries the schedule each trial really met.
	if _, err := realized.Write(dir, sum); err != nil {
		return sum, err
	}
	return sum, nil
}

// verdictError is the run's outcome as an error with its exit code.
func verdictError(s *verdict.Summary) error { return s.Err() }

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
