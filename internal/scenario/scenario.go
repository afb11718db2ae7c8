// Package scenario reads scenario files (see scenarios/): a workload, and a
// list of cases, each a backend with its options, faults scheduled in time,
// and the outcome the file expects. Everything is validated before any
// server starts: an unknown field, backend or fault, a bad duration, a
// fault aimed at a target the case's cluster does not have (or a link no
// instance uses), a fault window past the end of the run, a schedule too
// dense to run are all reported at once, each as file:line: field: problem.
package scenario

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/lockbench/lockbench/internal/targets"

	"github.com/lockbench/lockbench/internal/cluster"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/faults"
	"github.com/lockbench/lockbench/history"
	"github.com/lockbench/lockbench/internal/config"
	"github.com/lockbench/lockbench/internal/threshold"
	"github.com/lockbench/lockbench/internal/workload"
	"go.yaml.in/yaml/v3"
)

// Scenario is a parsed, validated scenario file.
type Scenario struct {
	Path        string
	Source      []byte // the file as read, stored in run.json
	Name        string
	Description string
	Seed        int64
	// Network is how servers and instances are placed: NetworkLoopback
	// (processes on loopback addresses of the run's slot) or NetworkHosts
	// (each in a network namespace of its own; root).
	Network string
	// Mode is the deployment mode every case runs in (cluster.Mode's name:
	// local, hosts, compose, targets, ssh, kubernetes).
	Mode string
	// Targets, when set, are the existing servers every case runs against;
	// Compose, the topology they are services of, when lockbench controls it.
	Targets *targets.File
	Compose *Compose
	Cases   []*Case
	// Doc is the file's top-level mapping as read: what bench replay and
	// bench hunt copy (name, seed, workload, network) around a case of
	// their own.
	Doc *yaml.Node
}

// Networks: where the servers and instances of a run live.
const (
	NetworkLoopback = "loopback"
	NetworkHosts    = "hosts"
)

// Case is one backend under one workload and fault schedule.
type Case struct {
	Name        string
	BackendName string
	Network     string // the scenario's
	Options     []byte // the backend options as YAML, decoded again by workers
	Backend     backends.Backend
	JobStrategy // a job workload's (jobs.go)
	Workload    workload.Workload
	Faults      []*Fault
	// Expect is what the file says; history.Expectation.WithDefaults
	// fills the rest when the history is checked.
	Expect history.Expectation
	// Row is the case's name as written; a case with trials > 1 runs as
	// cases named <row>.t1 ... <row>.tN.
	Row           string
	Trial, Trials int
	Need          int // trials that must meet the expectation
	// Thresholds are the scenario's and the case's, validated.
	Thresholds []string
	// Base and Point, for a case expanded from sweeps: the case's name as
	// written, and the swept values this point stands for.
	Base  string
	Point *Point
	// Lanes is, for a batch of side-by-side trials, how many trials it
	// runs at once (trials Trial .. Trial+Lanes-1); each lane has
	// LaneInstances instances and Workload.Keys.Count keys of its own.
	// Workload.Instances counts every lane's.
	Lanes, LaneInstances int
	// PlanSeed, when not 0, is the seed of the clients' plan (each
	// client's holds, thinks and key picks) for every trial of the case,
	// as written (plan_seed): a replay's clients then draw what the
	// replayed trial's drew. 0: the run derives one per trial from its
	// seed and the case's position.
	PlanSeed uint64
	// Fixed says the case's trials meet their faults at the times
	// written (trials: {spread: false}), not spread over the lock's
	// cycle: a replay's schedule is the one that really ran.
	Fixed bool
	// SpreadAll: trials: {spread: true}, every fault moves (see spread).
	SpreadAll bool
	// Source is the case as written, its sweeps expanded (a sweep point's
	// values in place): what bench replay rewrites with a recorded
	// schedule.
	Source *yaml.Node

	nemesis *nemesis
}

// Fault is one scheduled fault.
type Fault struct {
	Name string
	Type string
	// Targets are the fault's targets as expanded, parsed once: one name
	// or role, or a set of concrete targets of one kind.
	Targets []faults.Target
	// Group names faults that act together (MODEL §10): an idle member
	// is excused by an observed one.
	Group string
	// Lane is, for a fault of a side-by-side trial, its lane (1-based; 0:
	// none): a role resolves among that lane's instances only.
	Lane int
	// At is when it is scheduled: as written, plus Spread (see Spread).
	At    time.Duration
	For   time.Duration
	Fault faults.Fault
	// Spread is how much later than written the fault is scheduled, so
	// that the trials of a row meet it at points of the lock's own cycle
	// (Cycle) spread by the seed: each trial an independent draw.
	Spread, Cycle time.Duration
	// Kept says why a trial's fault keeps the time written (Kept*).
	Kept string
	// Trial, when not 0, is the one trial of the row the fault belongs
	// to (trial: N, 1-based): the others do not meet it. 0: every trial.
	Trial int
	// Options are the fault's own options as written (latency, jump,
	// percent...), for the records: faults.jsonl and the realized
	// schedules carry them, and a replay writes them back.
	Options map[string]any
	// Written is the target as the trial wrote it, before a side-by-side
	// lane moved it to its own instances and keys (instance-2, not
	// instance-8): what a replay of that trial writes back.
	Written string

	line int // where the fault was written, for errors found later
}

// Target is the fault's target as the records write it (faults.jsonl,
// the fault marks): its targets, separated by commas.
func (f *Fault) Target() string { return faults.Targets(f.Targets) }

// Meta describes the case for its case-start mark.
func (c *Case) Meta() history.CaseMeta {
	m := history.CaseMeta{Name: c.Name, Backend: c.BackendName, Fenced: c.Backend.Fenced(),
		Duration: int64(c.Workload.Duration), Expect: c.Expect,
		Clients: c.Workload.Instances * c.Workload.Clients, Keys: c.Workload.Keys.Count,
		LeaseNs: int64(backends.LeaseTime(c.Backend, c.Workload.TTL.D())), OpTimeoutNs: int64(c.Workload.OpTimeout),
		Row: c.Row, Trial: c.Trial, Trials: c.Trials, Need: c.Need, Thresholds: c.Thresholds, Lanes: c.Lanes, LaneInstances: c.LaneInstances}
	if p := c.Point; p != nil {
		m.Sweep = &history.SweepPoint{Case: c.Base, Labels: p.Labels, Values: p.Values, X: p.X}
	}
	m.Lockless = backends.IsLockless(c.Backend)
	m.LeaseRenewed = backends.RenewsLease(c.Backend)
	m.ExpiryBoundNs = int64(backends.ExpiryBound(c.Backend, c.Workload.TTL.D()))
	if c.Network == NetworkHosts {
		m.Network = NetworkHosts
	}
	if info, err := backends.Lookup(c.BackendName); err == nil {
		m.Control = info.Unsafe
	}
	_, m.Store = c.Backend.(backends.Verifier)
	if c.Workload.WrongTokenRelease > 0 {
		m.Misuse = append(m.Misuse, "wrong-token release")
	}
	if lease := m.LeaseNs; lease > 0 && c.Workload.AutoExtend.Every == 0 && int64(c.Workload.Longest(func(w workload.Workload) time.Duration { return w.Hold.Upper() })) > lease {
		m.Misuse = append(m.Misuse, "work longer than the lease")
	}
	for _, f := range c.Faults {
		sa := history.ScheduledAt{FaultCore: f.Core(), At: int64(f.At), For: int64(f.For), Group: f.Group, Lane: f.Lane,
			SpreadNs: int64(f.Spread), CycleNs: int64(f.Cycle)}
		if info, err := faults.Lookup(f.Type); err == nil {
			sa.Class = info.Class(f.Targets[0])
		}
		m.Faults = append(m.Faults, sa)
	}
	return c.jobsMeta(m)
}

// file mirrors the YAML layout.
type file struct {
	Name        string      `yaml:"name"`
	Description string      `yaml:"description"`
	Seed        *int64      `yaml:"seed"`
	Network     string      `yaml:"network"`
	Workload    yaml.Node   `yaml:"workload"`
	Thresholds  []yaml.Node `yaml:"thresholds"`
	Cases       []yaml.Node `yaml:"cases"`
}

type caseDoc struct {
	Name       string      `yaml:"name"`
	Backend    string      `yaml:"backend"`
	Options    yaml.Node   `yaml:"options"`
	Workload   yaml.Node   `yaml:"workload"`
	Faults     []yaml.Node `yaml:"faults"`
	Expect     expectDoc   `yaml:"expect"`
	Trials     *trialsDoc  `yaml:"trials"`
	Nemesis    *nemesisDoc `yaml:"nemesis"`
	Thresholds []yaml.Node `yaml:"thresholds"`
	PlanSeed   uint64      `yaml:"plan_seed"`

	StrategyDoc `yaml:",inline"` // jobs.go
}

// Load reads and validates the scenario file at path. A non-nil error is
// either an *Errors (the file is wrong) or an I/O error.
func Load(path string) (*Scenario, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read scenario: %w", err)
	}
	return Parse(path, src)
}

// Options change how a scenario file is read.
type Options struct {
	// Network overrides the file's network ("" keeps it).
	Network string
	// Targets points every case at existing servers (bench run -targets)
	// instead of local ones: each case's servers must be in it, and faults
	// that need to run the servers are rejected.
	Targets *targets.File
	// Compose, with Targets, says the servers are services of a docker
	// compose topology lockbench may control (pause, kill, restart, cut).
	Compose *Compose
}

// Compose names a running docker compose topology.
type Compose struct {
	File        string `json:"file"`
	Project     string `json:"project"`
	WorkerImage string `json:"worker_image"`
}

// LoadWith is Load with options.
func LoadWith(path string, o Options) (*Scenario, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read scenario: %w", err)
	}
	return ParseWith(path, src, o)
}

// Parse validates scenario text; path is used in messages.
func Parse(path string, src []byte) (*Scenario, error) {
	return ParseWith(path, src, Options{})
}

// ParseWith is Parse with options.
func ParseWith(path string, src []byte, o Options) (*Scenario, error) {
	errs := &Errors{Path: path}
	var root yaml.Node
	if err := yaml.Unmarshal(src, &root); err != nil {
		errs.addErr(1, "", err)
		return nil, errs
	}
	if len(root.Content) == 0 {
		errs.add(1, "", "the file is empty: want name, workload and cases")
		return nil, errs
	}
	doc := root.Content[0]
	if doc.Kind != yaml.MappingNode {
		errs.add(doc.Line, "", "want a mapping with name, workload and cases, not a %s", kindName(doc))
		return nil, errs
	}
	var f file
	if err := config.DecodeStrict(doc, &f); err != nil {
		errs.addErr(doc.Line, "", err)
		return nil, errs
	}
	s := &Scenario{Path: path, Source: src, Name: f.Name, Description: f.Description, Seed: 1, Network: f.Network, Doc: doc}
	if f.Seed != nil {
		s.Seed = *f.Seed
	}
	if o.Network != "" {
		s.Network = o.Network
	}
	switch s.Network {
	case "":
		s.Network = NetworkLoopback
	case NetworkLoopback:
	case NetworkHosts:
		if err := cluster.Probe.Hosts(); err != nil {
			errs.add(lineOf(doc, "network", 1), "network", "hosts: %v", err)
		}
	default:
		errs.add(lineOf(doc, "network", 1), "network", "%q is not loopback or hosts", s.Network)
	}
	if o.Targets != nil && s.Network == NetworkHosts {
		errs.add(lineOf(doc, "network", 1), "network", "hosts places the servers lockbench starts; with a targets file it starts none")
	}
	s.Targets = o.Targets
	s.Compose = o.Compose
	s.Mode = modeName(s.Network, o.Targets, o.Compose != nil)
	if o.Compose != nil && o.Targets == nil {
		errs.add(1, "compose", "a compose topology needs the targets file that names its servers")
	}
	if s.Name == "" {
		errs.add(lineOf(doc, "name", 1), "name", "missing (every scenario needs a name)")
	} else if !scenarioName.MatchString(s.Name) {
		errs.add(lineOf(doc, "name", 1), "name", "%q: a scenario name is at most 100 letters, digits, '-', '_' and '.' (it names results folders and is printed)", s.Name)
	}
	base := workload.Default()
	baseOK := true
	if err := config.DecodeStrict(&f.Workload, &base); err != nil {
		errs.addErr(f.Workload.Line, "workload", err)
		baseOK = false
	} else {
		for _, p := range base.Validate() {
			errs.add(lineOf(&f.Workload, p.Field, lineOf(doc, "workload", 1)), "workload."+p.Field, "%s", p.Msg)
		}
	}
	var common []string
	for i := range f.Thresholds {
		if src, ok := parseThreshold(errs, &f.Thresholds[i], fmt.Sprintf("thresholds[%d]", i)); ok {
			common = append(common, src)
		}
	}
	if len(f.Cases) == 0 {
		errs.add(lineOf(doc, "cases", 1), "cases", "the scenario has no cases")
	}
	seen := map[string]bool{}
	// ttlOf is what ttl_x multiplies: the case's lease (a Consul session's
	// TTL, an etcd lease rounded to seconds), or its workload's ttl for a
	// backend without one.
	ttlOf := func(n *yaml.Node) (time.Duration, bool) {
		if c := parseCase(&Errors{}, 0, n, base, baseOK, s.Network, s.Mode, o.Targets, o.Compose != nil); c != nil {
			if lease := backends.LeaseTime(c.Backend, c.Workload.TTL.D()); lease > 0 {
				return lease, true
			}
			return c.Workload.TTL.D(), true
		}
		w := base
		if wn := valueOf(n, "workload"); wn != nil {
			if err := config.DecodeStrict(wn, &w); err != nil {
				return 0, false
			}
		}
		return w.TTL.D(), true
	}
	if len(f.Cases) > MaxCases {
		errs.add(lineOf(doc, "cases", 1), "cases", "%d cases (at most %d a scenario)", len(f.Cases), MaxCases)
		return nil, errs
	}
	for i := range f.Cases {
		if len(s.Cases) > MaxCases {
			errs.add(lineOf(doc, "cases", 1), "cases", "its sweeps and trials make more than %d cases (at most %d a scenario)", MaxCases, MaxCases)
			return nil, errs
		}
		n := &f.Cases[i]
		nodes, points := expandSweeps(errs, fmt.Sprintf("cases[%d]", i), n, ttlOf)
		for k, pn := range nodes {
			c := parseCase(errs, i, pn, base, baseOK, s.Network, s.Mode, o.Targets, o.Compose != nil)
			if c == nil {
				break // one point's problems are every point's
			}
			c.Source = pn
			if p := points[k]; p != nil {
				c.Base, c.Point = c.Name, p
				c.Name += p.name()
				if !safePoint(p.name()) {
					errs.add(lineOf(n, "name", n.Line), fmt.Sprintf("cases[%d].name", i), "%q: swept values are printable, without spaces, slashes or shell characters (they name files and are printed)", c.Name)
					break
				}
			}
			c.Thresholds = append(append([]string(nil), common...), c.Thresholds...)
			if seen[c.Name] {
				errs.add(lineOf(n, "name", n.Line), fmt.Sprintf("cases[%d].name", i), "%q is used twice", c.Name)
			}
			seen[c.Name] = true
			s.Cases = append(s.Cases, expandTrials(errs, i, pn, c)...)
		}
	}
	if len(errs.List) > 0 {
		return nil, errs
	}
	if err := s.Reseed(s.Seed); err != nil {
		return nil, err
	}
	return s, nil
}

func parseThreshold(errs *Errors, n *yaml.Node, field string) (string, bool) {
	if n.Kind != yaml.ScalarNode {
		errs.add(n.Line, field, "want a threshold such as \"acquire_p99 < 50ms\"")
		return "", false
	}
	if _, err := threshold.Parse(n.Value); err != nil {
		errs.add(n.Line, field, "%v", err)
		return "", false
	}
	return n.Value, true
}

func parseCase(errs *Errors, i int, n *yaml.Node, base workload.Workload, baseOK bool, network, runMode string, ext *targets.File, compose bool) *Case {
	var cd caseDoc
	if n.Kind != yaml.MappingNode {
		errs.add(n.Line, fmt.Sprintf("cases[%d]", i), "want a mapping with name and backend, not a %s", kindName(n))
		return nil
	}
	if err := config.DecodeStrict(n, &cd); err != nil {
		errs.addErr(n.Line, fmt.Sprintf("cases[%d]", i), err)
		return nil
	}
	where := fmt.Sprintf("cases[%d]", i)
	if cd.Name != "" {
		where = fmt.Sprintf("cases[%d] (%s)", i, cd.Name)
	}
	line := func(path string) int { return lineOf(n, path, n.Line) }
	c := &Case{Name: cd.Name, BackendName: cd.Backend, Network: network, PlanSeed: cd.PlanSeed}
	if c.Name == "" {
		errs.add(n.Line, where+".name", "missing")
	} else if !caseName.MatchString(c.Name) {
		errs.add(line("name"), where+".name", "%q: a case name is at most 100 letters, digits, '-' and '_' (it names files and is printed)", c.Name)
	}
	ok := true
	c.Workload = base
	if err := config.DecodeStrict(&cd.Workload, &c.Workload); err != nil {
		errs.addErr(line("workload"), where+".workload", err)
		ok = false
	} else {
		for _, p := range c.Workload.Validate() {
			// A problem of the scenario's own workload was reported there
			// once; a case reports what it writes itself, or what its
			// fields make of the scenario's.
			if has(&cd.Workload, p.Field) || !baseOK || !baseProblem(base, p) {
				errs.add(lineOf(&cd.Workload, p.Field, line("workload")), where+".workload."+p.Field, "%s", p.Msg)
			}
			ok = false
		}
	}
	for k := range cd.Thresholds {
		if src, good := parseThreshold(errs, &cd.Thresholds[k], fmt.Sprintf("%s.thresholds[%d]", where, k)); good {
			c.Thresholds = append(c.Thresholds, src)
		}
	}
	if !parseStrategy(errs, c, &cd, where, line) {
		return nil
	} else if cd.Backend == "" {
		errs.add(n.Line, where+".backend", "missing (known: %s)", backendNames())
		return nil
	}
	if cd.Options.Kind != 0 {
		if err := config.CheckAliases(&cd.Options); err != nil {
			errs.add(line("options"), where+".options", "%v", err)
			return nil
		}
		b, err := yaml.Marshal(resolveAliases(&cd.Options))
		if err != nil {
			errs.add(line("options"), where+".options", "%v", err)
			return nil
		}
		c.Options = b
	}
	be, err := backends.New(cd.Backend, func(v any) error { return config.DecodeStrict(&cd.Options, v) })
	if err != nil {
		field := where + ".backend"
		if cd.Options.Kind != 0 && !strings.Contains(err.Error(), "unknown backend") {
			field = where + ".options"
		}
		at := line("backend")
		if strings.HasPrefix(field, where+".options") {
			at = line("options")
		}
		errs.addErr(at, field, err)
		return nil
	}
	c.Backend = be
	if !checkElects(errs, c, cd.Backend, where, line) {
		ok = false
	}
	if can, says := backends.CanExtend(be); says && !can && c.Workload.AutoExtend.Every > 0 {
		errs.add(line("workload"), where+".workload.auto_extend", "backend %s declares it cannot extend a lease (a driver's extend option)", cd.Backend)
		ok = false
	}
	if ext != nil {
		if err := ext.Check(be.Servers()); err != nil {
			errs.addErr(line("backend"), where+".backend", err)
			ok = false
		}
	}
	if !cd.Expect.check(errs, line("expect"), where+".expect") {
		ok = false
	}
	c.Expect = cd.Expect.record()
	if !ok {
		return nil
	}
	targets, serverKinds := c.targets()
	serverLinks := map[string]bool{}
	for _, l := range cluster.ServerLinks(c.Servers()) {
		serverLinks[l] = true
	}
	sc := scheduleCtx{errs: errs, targets: targets, serverKinds: serverKinds, serverLinks: serverLinks, runFor: c.Workload.Duration.D(), keys: c.Workload.Keys.Count, hosts: network == NetworkHosts || compose, external: ext != nil && !compose, compose: compose, oneMember: backends.OneMember(c.Backend), jobs: c.Workload.Jobs.On()}
	if ext != nil && !compose {
		sc.controlled = ext.Controlled
		sc.controlHas = func(server, field string) bool { return ext.Control[server].Has(field) }
	}
	mode, err := cluster.LookupMode(runMode)
	if err != nil {
		errs.add(n.Line, where, "%v", err)
		return nil
	}
	sc.mode = mode
	if mode.Name == cluster.ModeKubernetes {
		if err := cluster.Probe.Kubernetes(); err != nil {
			errs.add(n.Line, where, "%v", err)
			return nil
		}
	}
	names := map[string]bool{}
	for j := range cd.Faults {
		f := sc.parseFault(where, j, &cd.Faults[j])
		if f == nil {
			ok = false
			continue
		}
		if names[f.Name] {
			errs.add(cd.Faults[j].Line, fmt.Sprintf("%s.faults[%d].name", where, j), "%q is used twice", f.Name)
		}
		names[f.Name] = true
		c.Faults = append(c.Faults, f)
	}
	if cd.Nemesis != nil {
		nl := line("nemesis")
		if field, p := validateNemesis(cd.Nemesis); p != "" {
			errs.add(lineOf(valueOf(n, "nemesis"), field, nl), where+".nemesis."+field, "%s", p)
			ok = false
		} else {
			c.nemesis = &nemesis{doc: cd.Nemesis, where: where, line: nl, sc: sc, fixed: c.Faults}
			// Every template must be a valid fault on its own.
			for j := range cd.Nemesis.Faults {
				if sc.parseFault(where+".nemesis", j, withWindow(&cd.Nemesis.Faults[j], 0, time.Millisecond, "")) == nil {
					ok = false
				}
			}
		}
	}
	checkOverlaps(errs, line("faults"), where, c.Faults)
	if !ok {
		return nil
	}
	return c
}

// modeName is the deployment mode of a run (cluster.ModeOf chooses it).
func modeName(network string, ext *targets.File, compose bool) string {
	w := cluster.Where{Hosts: network == NetworkHosts, Targets: ext != nil, Compose: compose}
	if ext != nil {
		w.Plane = ext.Plane()
	}
	return cluster.ModeOf(w)
}

// baseProblem reports whether p is a problem of the scenario's workload
// itself (already reported there).
func baseProblem(base workload.Workload, p workload.Problem) bool {
	for _, q := range base.Validate() {
		if q == p {
			return true
		}
	}
	return false
}

func backendNames() string {
	var n []string
	for _, b := range backends.All() {
		n = append(n, b.Name)
	}
	return strings.Join(n, ", ")
}
