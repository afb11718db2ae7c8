package scenario

import (
	"slices"
	"strings"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/history"
	"github.com/lockbench/lockbench/internal/config"
	"github.com/lockbench/lockbench/jobs"
	"go.yaml.in/yaml/v3"
)

// This file reads a case's job strategy (checker/MODEL.md §20).

// JobStrategy is a case's job strategy: its name, its options as YAML
// (decoded again by the workers) and the strategy; "" for the lock loop.
type JobStrategy struct {
	StrategyName    string
	StrategyOptions []byte
	Strategy        jobs.Strategy
}

// StrategyDoc is a case's strategy as written (exported for the YAML
// decoder to inline it).
type StrategyDoc struct {
	Strategy        string    `yaml:"strategy"`
	StrategyOptions yaml.Node `yaml:"strategy_options"`
}

// jobsBackend is the backend a strategy that takes no lock runs on: the
// sink's PostgreSQL is its only server, and its lock is never taken.
const jobsBackend = "postgres"

// parseStrategy reads the case's strategy: required with a job workload,
// refused without one; a strategy that takes the case's lock needs a
// backend, one that takes none names none (its server is the sink's). It
// reports whether the case may go on being read.
func parseStrategy(errs *Errors, c *Case, cd *caseDoc, where string, line func(string) int) bool {
	on := c.Workload.Jobs.On()
	switch {
	case cd.Strategy == "" && !on:
		if cd.StrategyOptions.Kind != 0 {
			errs.add(line("strategy_options"), where+".strategy_options", "no strategy: options of what?")
			return false
		}
		return true
	case cd.Strategy == "":
		errs.add(line("workload"), where+".strategy", "a job workload needs a strategy (known: %s)", strategyNames())
		return false
	case !on:
		errs.add(line("strategy"), where+".strategy", "a strategy runs jobs: the workload has none (jobs.count)")
		return false
	}
	info, err := jobs.Lookup(cd.Strategy)
	if err != nil {
		errs.addErr(line("strategy"), where+".strategy", err)
		return false
	}
	if cd.StrategyOptions.Kind != 0 {
		b, err := yaml.Marshal(resolveAliases(&cd.StrategyOptions))
		if err != nil {
			errs.add(line("strategy_options"), where+".strategy_options", "%v", err)
			return false
		}
		c.StrategyOptions = b
	}
	st, err := jobs.New(cd.Strategy, func(v any) error { return config.DecodeStrict(&cd.StrategyOptions, v) })
	if err != nil {
		errs.addErr(line("strategy_options"), where+".strategy_options", err)
		return false
	}
	switch {
	case info.Lock && cd.Backend == "":
		errs.add(line("strategy"), where+".backend", "strategy %s takes the case's lock: name its backend", cd.Strategy)
		return false
	case info.Elects && cd.Backend == "":
		errs.add(line("strategy"), where+".backend", "strategy %s campaigns in the case's backend's election: name its backend (%s)", cd.Strategy, electorNames())
		return false
	case info.Elects:
	case !info.Lock && cd.Backend != "":
		errs.add(line("backend"), where+".backend", "strategy %s takes no lock: leave the backend out (its server is the sink's PostgreSQL)", cd.Strategy)
		return false
	case !info.Lock:
		cd.Backend, c.BackendName = jobsBackend, jobsBackend
	}
	c.StrategyName, c.Strategy = cd.Strategy, st
	return true
}

// checkElects refuses a strategy that campaigns in an election on a
// backend that has none (once the backend is built).
func checkElects(errs *Errors, c *Case, backend, where string, line func(string) int) bool {
	if c.Strategy == nil || !jobs.Elects(c.Strategy) || backends.Elects(c.Backend) {
		return true
	}
	errs.add(line("backend"), where+".backend", "strategy %s campaigns in an election: backend %s has none (%s have)", c.StrategyName, backend, electorNames())
	return false
}

// electorNames lists the backends that can elect a leader.
func electorNames() string {
	var n []string
	for _, b := range backends.All() {
		if be, err := b.New(func(any) error { return nil }); err == nil && backends.Elects(be) {
			n = append(n, b.Name)
		}
	}
	return strings.Join(n, ", ")
}

func strategyNames() string {
	var n []string
	for _, s := range jobs.All() {
		n = append(n, s.Name)
	}
	return strings.Join(n, ", ")
}

// Servers lists the servers the case's cluster needs: its backend's, and
// for a job workload the effect sink's and the strategy's own (a
// broker), each once.
func (c *Case) Servers() []backends.ServerSpec {
	s := c.Backend.Servers()
	if c.Strategy != nil {
		s = jobs.WithSink(s)
		for _, sp := range jobs.Servers(c.Strategy) {
			if !slices.ContainsFunc(s, func(o backends.ServerSpec) bool { return o.Name == sp.Name }) {
				s = append(s, sp)
			}
		}
	}
	return s
}

// jobServers are the servers of a job workload that are not its
// backend's (the sink's, a broker's): every instance dials them.
func (c *Case) jobServers() []string {
	if c.Strategy == nil {
		return nil
	}
	var out []string
	own := c.Backend.Servers()
	for _, s := range c.Servers() {
		if !slices.ContainsFunc(own, func(o backends.ServerSpec) bool { return o.Name == s.Name }) {
			out = append(out, s.Name)
		}
	}
	return out
}

// jobsMeta records a job workload in the case's meta: its jobs, and a
// strategy that takes no lock as lockless; its control flag is the
// strategy's (and, for the lock strategy, the lock's).
func (c *Case) jobsMeta(m history.CaseMeta) history.CaseMeta {
	if c.Strategy == nil {
		return m
	}
	j := c.Workload.Jobs
	m.Jobs = &history.JobsMeta{Strategy: c.StrategyName, Count: j.Count, EveryNs: int64(j.Every), GraceNs: int64(j.Grace), Lock: jobs.TakesLock(c.Strategy)}
	m.Lockless = !m.Jobs.Lock
	if info, err := jobs.Lookup(c.StrategyName); err == nil {
		m.Control = info.Unsafe || (info.Lock && m.Control)
	}
	return m
}
