// Package scenario reads scenario files (see scenarios/): a workload, and a
// list of cases, each a backend with its options, faults scheduled in time,
// and the outcome the file expects. Everything is validated before any
// server starts: an unknown field, backend or fault, a bad duration, a
// fault aimed at a target the case's cluster does not have, or a fault
// window past the end of the run are all reported at once, each naming the
// file, the line and the field.
package scenario

import (
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/faults"
	"github.com/lockbench/lockbench/internal/cluster"
	"github.com/lockbench/lockbench/internal/config"
	"github.com/lockbench/lockbench/internal/history"
	"github.com/lockbench/lockbench/internal/threshold"
	"gopkg.in/yaml.v3"
)

// Scenario is a parsed, validated scenario file.
type Scenario struct {
	Path        string
	Source      []byte // the file as read, stored in run.json
	Name        string
	Description string
	Seed        int64
	Cases       []*Case
}

// Case is one backend under one workload and fault schedule.
type Case struct {
	Name        string
	BackendName string
	Options     []byte // the backend options as YAML, decoded again by workers
	Backend     backends.Backend
	Workload    Workload
	Faults      []*Fault
	Expect      history.Expectation
	// Row is the case's name as written; a case with trials > 1 runs as
	// cases named <row>.t1 ... <row>.tN.
	Row           string
	Trial, Trials int
	Need          int // trials that must meet the expectation
	// Thresholds are the scenario's and the case's, validated.
	Thresholds []string

	nemesis *nemesis
}

// Fault is one scheduled fault.
type Fault struct {
	Name   string
	Type   string
	Target string
	At     time.Duration
	For    time.Duration
	Fault  faults.Fault
}

// Meta describes the case for its case-start mark.
func (c *Case) Meta() history.CaseMeta {
	m := history.CaseMeta{Name: c.Name, Backend: c.BackendName, Fenced: c.Backend.Fenced(),
		Duration: int64(c.Workload.Duration), Expect: c.Expect,
		Clients: c.Workload.Instances * c.Workload.Clients, Keys: c.Workload.Keys.Count,
		Row: c.Row, Trial: c.Trial, Trials: c.Trials, Need: c.Need, Thresholds: c.Thresholds}
	for _, f := range c.Faults {
		m.Faults = append(m.Faults, history.ScheduledAt{Name: f.Name, Type: f.Type, Target: f.Target, At: int64(f.At), For: int64(f.For)})
	}
	return m
}

// file mirrors the YAML layout.
type file struct {
	Name        string    `yaml:"name"`
	Description string    `yaml:"description"`
	Seed        *int64    `yaml:"seed"`
	Workload    yaml.Node `yaml:"workload"`
	Thresholds  []string  `yaml:"thresholds"`
	Cases       []caseDoc `yaml:"cases"`
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
	Thresholds []string    `yaml:"thresholds"`
}

// nemesisDoc draws faults from a seeded random schedule: starting at Start,
// every Every (a random gap between two fault starts), one of Faults, for a
// random For. The same seed and scenario give the same schedule.
type nemesisDoc struct {
	Start  config.Duration `yaml:"start"`
	Every  rangeDoc        `yaml:"every"`
	For    rangeDoc        `yaml:"for"`
	Faults []yaml.Node     `yaml:"faults"`
}

type rangeDoc struct {
	Min config.Duration `yaml:"min"`
	Max config.Duration `yaml:"max"`
}

func (r rangeDoc) draw(rng *rand.Rand) time.Duration {
	if r.Max <= r.Min {
		return r.Min.D()
	}
	return r.Min.D() + time.Duration(rng.Int64N(int64(r.Max-r.Min)+1))
}

// nemesis is what a case needs to redraw its schedule for a new seed.
type nemesis struct {
	doc         *nemesisDoc
	where       string
	targets     map[string]faults.Kind
	serverKinds map[string]string
	fixed       []*Fault
}

// trialsDoc repeats a case: count runs, of which need must meet the
// expectation (default: all of them).
type trialsDoc struct {
	Count int `yaml:"count"`
	Need  int `yaml:"need"`
}

type expectDoc struct {
	Violations    *bool  `yaml:"violations"`
	StaleAccepted *bool  `yaml:"stale_writes_accepted"`
	LostUpdates   *bool  `yaml:"lost_updates"`
	Note          string `yaml:"note"`
}

// Errors is every problem found in a scenario file.
type Errors struct {
	Path string
	List []string
}

func (e *Errors) Error() string {
	return fmt.Sprintf("%s: %d problem(s):\n  %s", e.Path, len(e.List), strings.Join(e.List, "\n  "))
}

func (e *Errors) add(line int, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if line > 0 {
		msg = fmt.Sprintf("%s:%d: %s", e.Path, line, msg)
	} else {
		msg = fmt.Sprintf("%s: %s", e.Path, msg)
	}
	e.List = append(e.List, msg)
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

// Parse validates scenario text; path is used in messages.
func Parse(path string, src []byte) (*Scenario, error) {
	errs := &Errors{Path: path}
	var f file
	if err := config.DecodeStrictBytes(src, &f, 0); err != nil {
		errs.add(0, "%s", yamlMsg(err))
		return nil, errs
	}
	s := &Scenario{Path: path, Source: src, Name: f.Name, Description: f.Description, Seed: 1}
	if f.Seed != nil {
		s.Seed = *f.Seed
	}
	if s.Name == "" {
		errs.add(0, "name: missing (every scenario needs a name)")
	}
	base := DefaultWorkload()
	if err := config.DecodeStrict(&f.Workload, &base); err != nil {
		errs.add(0, "workload: %s", yamlMsg(err))
	}
	if len(f.Cases) == 0 {
		errs.add(0, "cases: the scenario has no cases")
	}
	seen := map[string]bool{}
	for i := range f.Cases {
		cd := &f.Cases[i]
		c := parseCase(errs, i, cd, base)
		if c == nil {
			continue
		}
		for _, src := range append(append([]string(nil), f.Thresholds...), cd.Thresholds...) {
			if _, err := threshold.Parse(src); err != nil {
				errs.add(0, "cases[%d] (%s).thresholds: %v", i, c.Name, err)
				continue
			}
			c.Thresholds = append(c.Thresholds, src)
		}
		if seen[c.Name] {
			errs.add(0, "cases[%d].name: %q is used twice", i, c.Name)
		}
		seen[c.Name] = true
		s.Cases = append(s.Cases, expandTrials(errs, i, cd, c)...)
	}
	if len(errs.List) > 0 {
		return nil, errs
	}
	if err := s.Reseed(s.Seed); err != nil {
		return nil, err
	}
	return s, nil
}

func parseCase(errs *Errors, i int, cd *caseDoc, base Workload) *Case {
	where := fmt.Sprintf("cases[%d]", i)
	if cd.Name != "" {
		where = fmt.Sprintf("cases[%d] (%s)", i, cd.Name)
	}
	c := &Case{Name: cd.Name, BackendName: cd.Backend}
	if c.Name == "" {
		errs.add(0, "%s.name: missing", where)
	} else if strings.ContainsAny(c.Name, " /\t.") {
		errs.add(0, "%s.name: %q may not contain spaces, dots or slashes", where, c.Name)
	}
	ok := true
	c.Workload = base
	if err := config.DecodeStrict(&cd.Workload, &c.Workload); err != nil {
		errs.add(0, "%s.workload: %s", where, yamlMsg(err))
		ok = false
	}
	for _, p := range c.Workload.Validate() {
		errs.add(cd.Workload.Line, "%s.workload.%s", where, p)
		ok = false
	}
	if cd.Backend == "" {
		errs.add(0, "%s.backend: missing (known: %s)", where, backendNames())
		return nil
	}
	if cd.Options.Kind != 0 {
		b, err := yaml.Marshal(&cd.Options)
		if err != nil {
			errs.add(cd.Options.Line, "%s.options: %v", where, err)
			return nil
		}
		c.Options = b
	}
	be, err := backends.New(cd.Backend, func(v any) error { return config.DecodeStrict(&cd.Options, v) })
	if err != nil {
		errs.add(cd.Options.Line, "%s.backend: %s", where, yamlMsg(err))
		return nil
	}
	c.Backend = be
	c.Expect = history.Expectation{Violations: cd.Expect.Violations, StaleAccepted: cd.Expect.StaleAccepted,
		LostUpdates: cd.Expect.LostUpdates, Note: cd.Expect.Note}
	if c.Expect.Violations == nil {
		// Unless a scenario says an algorithm is expected to break, it is
		// expected to hold: a silent default of "anything goes" would let a
		// regression pass a CI gate.
		no := false
		c.Expect.Violations = &no
	}
	if c.Expect.StaleAccepted == nil && be.Fenced() {
		no := false
		c.Expect.StaleAccepted = &no
	}
	targets, serverKinds := c.targets()
	names := map[string]bool{}
	for j := range cd.Faults {
		f := parseFault(errs, where, j, &cd.Faults[j], targets, serverKinds, c.Workload.Duration.D(), c.Workload.Keys.Count)
		if f == nil {
			ok = false
			continue
		}
		if names[f.Name] {
			errs.add(cd.Faults[j].Line, "%s.faults[%d].name: %q is used twice", where, j, f.Name)
		}
		names[f.Name] = true
		c.Faults = append(c.Faults, f)
	}
	if cd.Nemesis != nil {
		if p := validateNemesis(cd.Nemesis); p != "" {
			errs.add(0, "%s.nemesis: %s", where, p)
			ok = false
		}
		c.nemesis = &nemesis{doc: cd.Nemesis, where: where, targets: targets, serverKinds: serverKinds, fixed: c.Faults}
		// Every template must be a valid fault on its own.
		for j := range cd.Nemesis.Faults {
			if parseFault(errs, where+".nemesis", j, withWindow(&cd.Nemesis.Faults[j], 0, time.Millisecond, ""), targets, serverKinds, c.Workload.Duration.D(), c.Workload.Keys.Count) == nil {
				ok = false
			}
		}
	}
	checkOverlaps(errs, where, c.Faults)
	if !ok {
		return nil
	}
	return c
}

func validateNemesis(n *nemesisDoc) string {
	switch {
	case len(n.Faults) == 0:
		return "faults: the nemesis has no faults to draw from"
	case n.Every.Min <= 0 || n.Every.Max < n.Every.Min:
		return "every: need 0 < min <= max"
	case n.For.Min <= 0 || n.For.Max < n.For.Min:
		return "for: need 0 < min <= max"
	case n.Start < 0:
		return "start: must not be negative"
	}
	return ""
}

// withWindow returns a copy of a fault template with at, for and name set.
func withWindow(tmpl *yaml.Node, at, dur time.Duration, name string) *yaml.Node {
	n := &yaml.Node{Kind: yaml.MappingNode, Line: tmpl.Line}
	for k := 0; k+1 < len(tmpl.Content); k += 2 {
		switch tmpl.Content[k].Value {
		case "at", "for", "name":
			continue
		}
		n.Content = append(n.Content, tmpl.Content[k], tmpl.Content[k+1])
	}
	scalar := func(v string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Value: v} }
	n.Content = append(n.Content, scalar("at"), scalar(at.String()), scalar("for"), scalar(dur.String()))
	if name != "" {
		n.Content = append(n.Content, scalar("name"), scalar(name))
	}
	return n
}

// Reseed draws every nemesis schedule again from seed (the scenario's, or
// `bench run --seed`). Each case draws from its own stream, keyed by its
// name, so trials get different schedules and adding a case does not change
// another's.
func (s *Scenario) Reseed(seed int64) error {
	s.Seed = seed
	errs := &Errors{Path: s.Path}
	for _, c := range s.Cases {
		if c.nemesis == nil {
			continue
		}
		h := fnv.New64a()
		h.Write([]byte(c.Name))
		rng := rand.New(rand.NewPCG(uint64(seed), h.Sum64()))
		nd := c.nemesis.doc
		faultsOut := append([]*Fault(nil), c.nemesis.fixed...)
		run := c.Workload.Duration.D()
		at := nd.Start.D()
		for i := 1; ; i++ {
			tmpl := rng.IntN(len(nd.Faults))
			dur := nd.For.draw(rng)
			if at+dur >= run {
				break
			}
			f := parseFault(errs, c.nemesis.where+".nemesis", tmpl, withWindow(&nd.Faults[tmpl], at, dur, fmt.Sprintf("nemesis-%d", i)),
				c.nemesis.targets, c.nemesis.serverKinds, run, c.Workload.Keys.Count)
			if f == nil {
				break
			}
			faultsOut = append(faultsOut, f)
			at += max(dur, nd.Every.draw(rng))
		}
		checkOverlaps(errs, c.nemesis.where, faultsOut)
		c.Faults = faultsOut
	}
	if len(errs.List) > 0 {
		return errs
	}
	return nil
}

// expandTrials turns a case with trials into one case per trial.
func expandTrials(errs *Errors, i int, cd *caseDoc, c *Case) []*Case {
	c.Row, c.Trial, c.Trials, c.Need = c.Name, 1, 1, 1
	if cd.Trials == nil {
		return []*Case{c}
	}
	t := *cd.Trials
	if t.Need == 0 {
		t.Need = t.Count
	}
	if t.Count < 1 || t.Count > 100 || t.Need < 1 || t.Need > t.Count {
		errs.add(0, "cases[%d] (%s).trials: need 1 <= need <= count <= 100, got count %d need %d", i, c.Name, t.Count, t.Need)
		return nil
	}
	out := make([]*Case, t.Count)
	for k := range out {
		cp := *c
		if t.Count > 1 {
			cp.Name = fmt.Sprintf("%s.t%d", c.Name, k+1)
		}
		cp.Trial, cp.Trials, cp.Need = k+1, t.Count, t.Need
		out[k] = &cp
	}
	return out
}

// targets lists the concrete target names of a case's cluster, and the
// server kind of each server. A client link is a target only if some
// instance dials that server, and link:<server>@instance-N only if
// instance N does: a fault on a link nobody uses would do nothing.
func (c *Case) targets() (map[string]faults.Kind, map[string]string) {
	t := map[string]faults.Kind{"link:resource": faults.Link}
	kindOfServer := map[string]string{}
	for i := 1; i <= c.Workload.Instances; i++ {
		t[fmt.Sprintf("instance-%d", i)] = faults.Instance
		t[fmt.Sprintf("link:resource@instance-%d", i)] = faults.Link
	}
	if c.Backend == nil {
		return t, kindOfServer
	}
	for _, s := range c.Backend.Servers() {
		t[s.Name] = faults.Server
		kindOfServer[s.Name] = s.Kind
		switch {
		case s.Kind == "etcd":
			t["link:"+s.Name+"-peer"] = faults.Link
		case s.Kind == "redis-replicated" && s.Name == "redis-1":
			t["link:"+s.Name+"-repl"] = faults.Link
		}
	}
	for i := 1; i <= c.Workload.Instances; i++ {
		for _, name := range backends.Dials(c.Backend, i, c.Workload.Instances) {
			t["link:"+name] = faults.Link
			t[fmt.Sprintf("link:%s@instance-%d", name, i)] = faults.Link
		}
	}
	return t, kindOfServer
}

var hasLeaderKind = map[string]bool{"etcd": true, "consul": true, "zookeeper": true, "redis-replicated": true}

var commonFaultKeys = map[string]bool{"name": true, "type": true, "target": true, "at": true, "for": true}

// checkRole says why a role cannot be resolved in this case, or "".
func checkRole(role string, targets map[string]faults.Kind, kindOfServer map[string]string, keys int) string {
	if key, ok := strings.CutPrefix(role, faults.RoleHolderOf); ok {
		var n int
		if _, err := fmt.Sscanf(key, "k%d", &n); err != nil || fmt.Sprintf("k%d", n) != key || n < 0 || n >= keys {
			return fmt.Sprintf("%q names no key of this workload (keys are k0..k%d)", role, keys-1)
		}
		return ""
	}
	switch role {
	case faults.RoleLeader:
		for name, k := range targets {
			if k == faults.Server && hasLeaderKind[kindOfServer[name]] {
				return ""
			}
		}
		return `role "leader" cannot be resolved: no server of this backend has a leader (etcd, consul, zookeeper, redis-sentinel do)`
	case faults.RoleMaster:
		for name := range targets {
			if kindOfServer[name] == "redis-replicated" {
				return ""
			}
		}
		return `role "master" cannot be resolved: only redis-sentinel has a master that can change`
	}
	return ""
}

func parseFault(errs *Errors, where string, j int, n *yaml.Node, targets map[string]faults.Kind, serverKinds map[string]string, runFor time.Duration, keys int) *Fault {
	fw := fmt.Sprintf("%s.faults[%d]", where, j)
	if n.Kind != yaml.MappingNode {
		errs.add(n.Line, "%s: want a mapping with type, target, at and for", fw)
		return nil
	}
	var common struct {
		Name   string          `yaml:"name"`
		Type   string          `yaml:"type"`
		Target string          `yaml:"target"`
		At     config.Duration `yaml:"at"`
		For    config.Duration `yaml:"for"`
	}
	rest := &yaml.Node{Kind: yaml.MappingNode, Line: n.Line}
	commonNode := &yaml.Node{Kind: yaml.MappingNode, Line: n.Line}
	for k := 0; k+1 < len(n.Content); k += 2 {
		if commonFaultKeys[n.Content[k].Value] {
			commonNode.Content = append(commonNode.Content, n.Content[k], n.Content[k+1])
		} else {
			rest.Content = append(rest.Content, n.Content[k], n.Content[k+1])
		}
	}
	if err := config.DecodeStrict(commonNode, &common); err != nil {
		errs.add(0, "%s: %s", fw, yamlMsg(err))
		return nil
	}
	f := &Fault{Name: common.Name, Type: common.Type, Target: common.Target, At: common.At.D(), For: common.For.D()}
	if f.Type == "" {
		errs.add(n.Line, "%s.type: missing (known: %s)", fw, faultNames())
		return nil
	}
	if f.Name == "" {
		f.Name = fmt.Sprintf("%s-%d", f.Type, j+1)
	}
	info, err := faults.Lookup(f.Type)
	if err != nil {
		errs.add(n.Line, "%s.type: %v", fw, err)
		return nil
	}
	bad := false
	switch {
	case f.Target == "":
		errs.add(n.Line, "%s.target: missing", fw)
		bad = true
	case faults.IsRole(f.Target):
		if msg := checkRole(f.Target, targets, serverKinds, keys); msg != "" {
			errs.add(n.Line, "%s.target: %s", fw, msg)
			bad = true
		} else if kind := faults.KindOf(f.Target); !info.Accepts(kind) {
			errs.add(n.Line, "%s.target: %s cannot target the %q role (it acts on %v, the role is a %s)", fw, f.Type, f.Target, info.Targets, kind)
			bad = true
		}
	default:
		kind, exists := targets[f.Target]
		if !exists {
			errs.add(n.Line, "%s.target: %q does not exist in this case's cluster (targets: %s)", fw, f.Target, sortedKeys(targets))
			bad = true
		} else if !info.Accepts(kind) {
			errs.add(n.Line, "%s.target: %s cannot act on %s %q (it acts on %v)", fw, f.Type, kind, f.Target, info.Targets)
			bad = true
		}
	}
	if f.At < 0 {
		errs.add(n.Line, "%s.at: must not be negative", fw)
		bad = true
	}
	if f.For < 0 || (f.For == 0 && !info.Instant) {
		errs.add(n.Line, "%s.for: must be a positive duration", fw)
		bad = true
	}
	if f.At+f.For >= runFor {
		errs.add(n.Line, "%s: the window %s+%s ends after the case's duration %s", fw, f.At, f.For, runFor)
		bad = true
	}
	ft, err := info.New(func(v any) error { return config.DecodeStrict(rest, v) })
	if err != nil {
		errs.add(n.Line, "%s: %s", fw, yamlMsg(err))
		bad = true
	}
	if named, ok := ft.(faults.Named); ok && err == nil {
		for _, name := range named.Names() {
			if targets[name] != faults.Server {
				errs.add(n.Line, "%s: %q does not exist in this case's cluster (servers: %s)", fw, name, serverNames(targets))
				bad = true
			}
		}
	}
	if info.NeedsFirewall && !bad {
		if msg := checkFirewall(f.Target, serverKinds, targets); msg != "" {
			errs.add(n.Line, "%s: %s", fw, msg)
			bad = true
		}
	}
	if bad {
		return nil
	}
	f.Fault = ft
	return f
}

// checkOverlaps rejects two faults on one target whose windows overlap.
func checkOverlaps(errs *Errors, where string, fs []*Fault) {
	for i := range fs {
		for j := i + 1; j < len(fs); j++ {
			a, b := fs[i], fs[j]
			if a.Target == b.Target && a.At < b.At+b.For && b.At < a.At+a.For {
				errs.add(0, "%s.faults: %s and %s overlap on target %s", where, a.Name, b.Name, a.Target)
			}
		}
	}
}

// checkFirewall says why an iptables partition cannot be made, or "". An
// instance can always be cut (its clients use its own address); servers
// must use their own address as the source of their peer connections.
func checkFirewall(target string, serverKinds map[string]string, targets map[string]faults.Kind) string {
	if err := cluster.FirewallAvailable(); err != nil {
		return err.Error()
	}
	if faults.KindOf(target) == faults.Instance || targets[target] == faults.Instance {
		return ""
	}
	kinds := map[string]bool{}
	if k, ok := serverKinds[target]; ok {
		kinds[k] = true
	} else { // a role: every server that could be it
		for _, k := range serverKinds {
			kinds[k] = true
		}
	}
	for k := range kinds {
		if !cluster.BindsSource(k) {
			return fmt.Sprintf("%s servers do not use their own address as the source of their peer connections, so an address-level partition between members would not separate them (cut an instance from them instead, or use link faults; etcd's peer links are link:<member>-peer)", k)
		}
	}
	return ""
}

func serverNames(targets map[string]faults.Kind) string {
	var out []string
	for n, k := range targets {
		if k == faults.Server {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}

func sortedKeys(m map[string]faults.Kind) string {
	var ks []string
	for k := range m {
		if !strings.Contains(k, "@") {
			ks = append(ks, k)
		}
	}
	sort.Strings(ks)
	return strings.Join(append(ks, "link:<server>@instance-N", faults.RoleHolder, faults.RoleHolderOf+"<key>", faults.RoleWaiter, faults.RoleLeader, faults.RoleMaster), ", ")
}

func backendNames() string {
	var n []string
	for _, b := range backends.All() {
		n = append(n, b.Name)
	}
	return strings.Join(n, ", ")
}

func faultNames() string {
	var n []string
	for _, f := range faults.All() {
		n = append(n, f.Name)
	}
	return strings.Join(n, ", ")
}

// yamlMsg strips yaml.v3's "yaml: " prefixes for readable messages.
func yamlMsg(err error) string {
	msg := err.Error()
	msg = strings.ReplaceAll(msg, "yaml: unmarshal errors:\n  ", "")
	msg = strings.ReplaceAll(msg, "yaml: ", "")
	msg = strings.ReplaceAll(msg, "\n  ", "; ")
	return msg
}

// IsConfigError reports whether err is a problem with the scenario file.
func IsConfigError(err error) bool {
	var e *Errors
	return errors.As(err, &e)
}
