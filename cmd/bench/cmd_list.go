package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/faults"
	"github.com/lockbench/lockbench/internal/cluster"
	"github.com/lockbench/lockbench/internal/config"
	"github.com/lockbench/lockbench/internal/exitcode"
	"github.com/lockbench/lockbench/internal/scenario"
	"github.com/lockbench/lockbench/jobs"
)

// listing is what bench list -json prints.
type listing struct {
	Backends   []backendEntry  `json:"backends"`
	Strategies []strategyEntry `json:"job_strategies"`
	Faults     []faultEntry    `json:"faults"`
	Scenarios  []scenarioEntry `json:"scenarios"`
}

type backendEntry struct {
	Name    string            `json:"name"`
	Summary string            `json:"summary"`
	Unsafe  bool              `json:"known_unsafe_control"`
	Options []backends.Option `json:"options"`
}

// strategyEntry is a job strategy (jobs.Info).
type strategyEntry struct {
	Name    string `json:"name"`
	Summary string `json:"summary"`
	// Backend: the case names a backend (its lock, or its election).
	Backend bool            `json:"needs_backend"`
	Unsafe  bool            `json:"known_unsafe_control"`
	Options []config.Option `json:"options,omitempty"`
}

type faultEntry struct {
	Name    string   `json:"name"`
	Summary string   `json:"summary"`
	Targets []string `json:"targets"`
	// ServerKinds limits the server kinds it acts on (the kinds that
	// declare what faults.Info.Asks;
	// empty: any).
	ServerKinds []string `json:"server_kinds,omitempty"`
	Root        bool     `json:"needs_root"`
	// Requires lists what the fault needs of the machine (faults.Info).
	Requires []string `json:"requires,omitempty"`
	// Claims is what it takes over of its target (faults.Info.Claims): two
	// faults that claim the same may not overlap on one target.
	Claims []string `json:"claims"`
	// Modes lists, per deployment mode (cluster.Mode), the classes of its
	// targets the fault acts on there; a mode that carries none is left out.
	Modes   map[string][]cluster.On `json:"modes"`
	Options []config.Option         `json:"options,omitempty"`
}

type scenarioEntry struct {
	File        string `json:"file"`
	Cases       int    `json:"cases"`
	Description string `json:"description,omitempty"`
	Error       string `json:"error,omitempty"`
}

func listCmd() *command {
	c := newCommand("list", "[SCENARIO_DIR]", "list backends with their options, fault types and scenario files", 0, 1)
	jsonOut := c.fs.Bool("json", false, "print the listing as JSON")
	brief := c.fs.Bool("brief", false, "leave the backends' options out")
	modes := c.fs.Bool("modes", false, "print which faults each deployment mode carries, as the README's table (markdown)")
	mode := c.fs.String("mode", "", "print how deployment mode `NAME` performs each fault (markdown; kubernetes: its Chaos Mesh mapping)")
	c.exec = func(_ context.Context, cio cmdIO, args []string) error {
		if *modes {
			_, err := io.WriteString(cio.stdout, modesTable())
			return err
		}
		if *mode != "" {
			m, err := cluster.LookupMode(*mode)
			if err != nil {
				return exitcode.With(err, exitcode.Config)
			}
			_, err = io.WriteString(cio.stdout, howTable(m))
			return err
		}
		// Backends, faults and modes always; scenario files where there is
		// a folder of them: the one named, or ./scenarios when it exists.
		dir, named := "scenarios", len(args) > 0
		if named {
			dir = args[0]
		} else if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			dir = ""
		}
		l, err := buildListing(dir)
		if err != nil {
			return err
		}
		if *jsonOut {
			return writeJSON(cio.stdout, l)
		}
		return l.write(cio.stdout, !*brief)
	}
	return c
}

func buildListing(dir string) (*listing, error) {
	l := &listing{}
	for _, b := range backends.All() {
		l.Backends = append(l.Backends, backendEntry{Name: b.Name, Summary: b.Summary, Unsafe: b.Unsafe, Options: b.OptionList()})
	}
	for _, s := range jobs.All() {
		l.Strategies = append(l.Strategies, strategyEntry{Name: s.Name, Summary: s.Summary, Backend: s.Lock || s.Elects, Unsafe: s.Unsafe, Options: config.OptionsOf(s.Options)})
	}
	for _, f := range faults.All() {
		var kinds []string
		for _, k := range f.Targets {
			kinds = append(kinds, string(k))
		}
		var reqs []string
		for _, r := range f.Requires() {
			reqs = append(reqs, string(r))
		}
		l.Faults = append(l.Faults, faultEntry{Name: f.Name, Summary: f.Summary, Targets: kinds, ServerKinds: f.ActsOn(cluster.FaultKinds()), Root: f.NeedsRoot(), Requires: reqs, Claims: f.ClaimList(), Modes: modesOf(f), Options: f.OptionList()})
	}
	if dir == "" {
		return l, nil
	}
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
		return nil, exitcode.With(fmt.Errorf("list scenarios: %w", err), exitcode.Config)
	}
	sort.Strings(files)
	for _, f := range files {
		e := scenarioEntry{File: f}
		if sc, err := scenario.Load(f); err == nil {
			e.Cases, e.Description = len(sc.Cases), firstLine(sc.Description)
		} else {
			e.Error = err.Error()
		}
		l.Scenarios = append(l.Scenarios, e)
	}
	return l, nil
}

func (l *listing) write(w io.Writer, options bool) error {
	width := 0
	for _, b := range l.Backends {
		width = max(width, len(b.Name))
	}
	for _, f := range l.Faults {
		width = max(width, len(f.Name))
	}
	for _, s := range l.Strategies {
		width = max(width, len(s.Name))
	}
	var b strings.Builder
	b.WriteString("BACKENDS\n")
	for _, be := range l.Backends {
		mark := ""
		if be.Unsafe {
			mark = " [known-unsafe control]"
		}
		fmt.Fprintf(&b, "  %-*s  %s%s\n", width, be.Name, be.Summary, mark)
		if options {
			ow := 0
			for _, o := range be.Options {
				ow = max(ow, len(o.Name)+len(o.Type)+3)
			}
			for _, o := range be.Options {
				fmt.Fprintf(&b, "  %-*s    %-*s  %s\n", width, "", ow, o.Name+" ("+o.Type+")", o.Doc)
			}
		}
	}
	b.WriteString("\nJOB STRATEGIES\n")
	for _, s := range l.Strategies {
		mark := ""
		if s.Backend {
			mark += " [backend: the case's]"
		}
		if s.Unsafe {
			mark += " [known-unsafe control]"
		}
		fmt.Fprintf(&b, "  %-*s  %s%s\n", width, s.Name, s.Summary, mark)
		if options {
			ow := 0
			for _, o := range s.Options {
				ow = max(ow, len(o.Name)+len(o.Type)+3)
			}
			for _, o := range s.Options {
				fmt.Fprintf(&b, "  %-*s    %-*s  %s\n", width, "", ow, o.Name+" ("+o.Type+")", o.Doc)
			}
		}
	}
	b.WriteString("\nFAULTS\n")
	for _, f := range l.Faults {
		root := ""
		switch {
		case f.Root:
			root = "; needs root (" + strings.Join(f.Requires, ", ") + ")"
		case len(f.Requires) > 0:
			root = "; needs " + strings.Join(f.Requires, ", ")
		}
		targets := strings.Join(f.Targets, ", ")
		if len(f.ServerKinds) > 0 {
			targets += " of kind " + strings.Join(f.ServerKinds, ", ")
		}
		var in []string
		for _, m := range cluster.Modes() {
			if ons := f.Modes[m.Name]; len(ons) > 0 {
				in = append(in, fmt.Sprintf("%s (%s)", m.Name, joinOns(ons)))
			}
		}
		remote := "; runs in: " + strings.Join(in, ", ")
		fmt.Fprintf(&b, "  %-*s  %s (targets: %s%s; takes over: %s%s)\n", width, f.Name, f.Summary, targets, root, strings.Join(f.Claims, ", "), remote)
		if options {
			ow := 0
			for _, o := range f.Options {
				ow = max(ow, len(o.Name)+len(o.Type)+3)
			}
			for _, o := range f.Options {
				fmt.Fprintf(&b, "  %-*s    %-*s  %s\n", width, "", ow, o.Name+" ("+o.Type+")", o.Doc)
			}
		}
	}
	b.WriteString("\nSCENARIOS\n")
	if len(l.Scenarios) == 0 {
		b.WriteString("none here: no scenarios/ folder in this directory (bench list DIR lists the scenario files under DIR)\n")
	}
	fw := 0
	for _, s := range l.Scenarios {
		fw = max(fw, len(s.File))
	}
	for _, s := range l.Scenarios {
		desc := fmt.Sprintf("%d case(s)", s.Cases)
		if s.Description != "" {
			desc += ": " + s.Description
		}
		if s.Error != "" {
			desc = "INVALID: " + firstLine(s.Error) + " (bench validate " + s.File + ")"
		}
		fmt.Fprintf(&b, "  %-*s  %s\n", fw, s.File, desc)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// modesOf maps each deployment mode to the target classes the fault acts
// on there.
func modesOf(f faults.Info) map[string][]cluster.On {
	out := map[string][]cluster.On{}
	for _, m := range cluster.Modes() {
		if ons := m.Carries(f); len(ons) > 0 {
			out[m.Name] = ons
		}
	}
	return out
}

func joinOns(ons []cluster.On) string {
	s := make([]string, len(ons))
	for i, on := range ons {
		s[i] = string(on)
	}
	return strings.Join(s, ", ")
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
