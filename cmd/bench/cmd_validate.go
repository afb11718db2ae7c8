package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/faults"
	"github.com/lockbench/lockbench/internal/exitcode"
	"github.com/lockbench/lockbench/internal/scenario"
)

func validateCmd() *command {
	c := newCommand("validate", "SCENARIO.yaml...", "check scenario files and print each case's fault schedule; starts nothing", 1, -1)
	c.long = `Parses each file exactly as bench run would (every field, every backend
option, every fault target against the servers its backend starts, the
seeded nemesis schedules) and prints, per case, its backend, servers,
workload and faults with their windows. Nothing is started. Exit 104 if
any file is invalid, after reporting every file.`
	seed := c.fs.Int64("seed", 0, "show the schedules this seed would give (as bench run -seed)")
	network := c.fs.String("network", "", "validate for this network (as bench run -network)")
	targetsFile := c.fs.String("targets", "", "validate against this targets file (as bench run -targets)")
	var comp composeFlags
	comp.define(c.fs)
	c.exec = func(_ context.Context, cio cmdIO, args []string) error {
		bad := 0
		reseed := false
		c.fs.Visit(func(f *flag.Flag) { reseed = reseed || f.Name == "seed" })
		so, err := scenarioOptions(*network, *targetsFile, comp)
		if err != nil {
			return err
		}
		for _, path := range args {
			sc, err := scenario.LoadWith(path, so)
			if err == nil && reseed {
				err = sc.Reseed(*seed)
			}
			if err != nil {
				bad++
				fmt.Fprintf(cio.stdout, "%s: INVALID\n%s\n\n", path, indent(err.Error(), "  "))
				continue
			}
			printSchedule(cio.stdout, path, sc)
		}
		if bad > 0 {
			return exitcode.With(fmt.Errorf("%d of %d scenario file(s) invalid", bad, len(args)), exitcode.Config)
		}
		return nil
	}
	return c
}

// printSchedule writes what a valid scenario would run.
func printSchedule(w io.Writer, path string, sc *scenario.Scenario) {
	fmt.Fprintf(w, "%s: valid: scenario %q, seed %d, mode %s, %d case(s)\n", path, sc.Name, sc.Seed, sc.Mode, len(sc.Cases))
	for _, c := range sc.Cases {
		wl := c.Workload
		var servers []string
		for _, s := range c.Servers() {
			servers = append(servers, s.Name)
		}
		srv := "none (in-process)"
		if len(servers) > 0 {
			srv = strings.Join(servers, ", ")
		}
		load := fmt.Sprintf("closed loop, %d×%d clients", wl.Instances, wl.Clients)
		if wl.Rate != nil {
			load = fmt.Sprintf("open loop, %d×%d clients", wl.Instances, wl.Clients)
		}
		fmt.Fprintf(w, "  %s  [%s] %s, %s, %d key(s), ttl %s\n", c.Name, c.BackendName, wl.Duration.D(), load, wl.Keys.Count, wl.TTL.D())
		fmt.Fprintf(w, "      servers: %s", srv)
		if lt := backends.LeaseTime(c.Backend, wl.TTL.D()); lt > 0 {
			fmt.Fprintf(w, "; lease %s", lt)
		}
		fmt.Fprintln(w)
		if len(c.Faults) == 0 {
			fmt.Fprintln(w, "      faults: none")
		} else {
			fmt.Fprintln(w, "      faults:")
		}
		for _, f := range c.Faults {
			// Each trial's offset, by its trial: side-by-side trials
			// run as one batch, a lane each.
			var note []string
			if c.Lanes > 1 && f.Lane > 0 {
				note = append(note, fmt.Sprintf("trial %d", c.Trial+f.Lane-1))
			}
			if n := f.ScheduleNote(fmtDur); n != "" {
				note = append(note, n)
			}
			spread := ""
			if len(note) > 0 {
				spread = " (" + strings.Join(note, ": ") + ")"
			}
			fmt.Fprintf(w, "        %8s – %-8s %-11s %s%s%s\n", fmtDur(f.At), fmtDur(f.At+f.For), f.Type, f.Target(), targetNote(f.Targets[0]), spread)
		}
	}
	fmt.Fprintln(w)
}

// targetNote says when a target is a role, resolved only at run time.
func targetNote(t faults.Target) string {
	if t.IsRole() {
		return " (role: resolved when the fault starts)"
	}
	return ""
}

func fmtDur(d time.Duration) string {
	return d.Round(time.Millisecond).String()
}

func indent(s, pre string) string {
	return pre + strings.ReplaceAll(s, "\n", "\n"+pre)
}
