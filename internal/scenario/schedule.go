package scenario

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"path"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/lockbench/lockbench/faults"
	"github.com/lockbench/lockbench/internal/cluster"
	"github.com/lockbench/lockbench/internal/config"
	"go.yaml.in/yaml/v3"
)

// MaxFaults bounds the faults of one case, fixed and drawn together: a
// nemesis whose gaps are tiny against the case's duration would otherwise
// expand into millions of faults.
const MaxFaults = 1000

// Least gap and window of a nemesis: finer than this, the harness cannot
// apply and observe a fault before the next one.
const (
	minNemesisEvery = 10 * time.Millisecond
	minNemesisFor   = time.Millisecond
)

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
	doc   *nemesisDoc
	where string
	line  int
	sc    scheduleCtx
	fixed []*Fault
}

// scheduleCtx is what validating a case's faults needs.
type scheduleCtx struct {
	errs        *Errors
	targets     map[string]faults.Kind
	serverKinds map[string]string
	serverLinks map[string]bool // links between servers (link:etcd-1-peer)
	runFor      time.Duration
	keys        int
	hosts       bool // every server and instance on a host of its own
	external    bool // the servers are not lockbench's (bench run -targets)
	compose     bool // the servers are containers lockbench controls
	oneMember   bool // the backend's instances talk to one member at a time
	// mode is the deployment mode of the case (cluster.Mode): what it can
	// do to each class of target.
	mode cluster.Mode
	// controlled: a targets file's server with a control plane (SSH);
	// controlHas: its control section gives a field (Mode.ControlNeeds).
	controlled func(server string) bool
	controlHas func(server, field string) bool
}

// classOf is the class of target t as a deployment mode sees it.
func (sc scheduleCtx) classOf(t string) cluster.On {
	pt := faults.ParseTarget(t)
	switch {
	case pt.Kind == faults.Instance:
		return cluster.OnInstance
	case pt.Kind == faults.Server:
		return cluster.OnServer
	case sc.serverLinks["link:"+pt.Name]:
		return cluster.OnServerLink
	}
	return cluster.OnClientLink
}

// modeFor is the mode that acts on target t of class on: the case's, but
// for a server of a targets file that has no control plane (or a server
// role when some server has none), which is in the targets mode.
func (sc scheduleCtx) modeFor(t string, on cluster.On) cluster.Mode {
	if on == cluster.OnServer && sc.controlled != nil && !sc.remoteTarget(t) {
		if m, err := cluster.LookupMode(cluster.ModeTargets); err == nil {
			return m
		}
	}
	return sc.mode
}

// here reports whether the mode performs the fault's action on target t
// on this machine, whose requirements then apply.
func (sc scheduleCtx) here(t string) bool {
	on := sc.classOf(t)
	return sc.modeFor(t, on).Here(on)
}

// remoteTarget reports whether a server fault on target reaches it over
// a control plane: a controlled server, or a server role when every server
// of the case is controlled.
func (sc scheduleCtx) remoteTarget(target string) bool {
	if sc.controlled == nil {
		return false
	}
	if !faults.IsRole(target) {
		return sc.controlled(target)
	}
	for name, k := range sc.targets {
		if k == faults.Server && !sc.controlled(name) {
			return false
		}
	}
	return true
}

// validateNemesis returns the field and the problem, or "" when valid.
func validateNemesis(n *nemesisDoc) (string, string) {
	switch {
	case len(n.Faults) == 0:
		return "faults", "the nemesis has no faults to draw from"
	case n.Every.Min < config.Duration(minNemesisEvery) || n.Every.Max < n.Every.Min:
		return "every", fmt.Sprintf("need %s <= min <= max", minNemesisEvery)
	case n.For.Min < config.Duration(minNemesisFor) || n.For.Max < n.For.Min:
		return "for", fmt.Sprintf("need %s <= min <= max", minNemesisFor)
	case n.Start < 0:
		return "start", "must not be negative"
	}
	return "", ""
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
	scalar := func(v string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Value: v, Line: tmpl.Line} }
	n.Content = append(n.Content, scalar("at"), scalar(at.String()), scalar("for"), scalar(dur.String()))
	if name != "" {
		n.Content = append(n.Content, scalar("name"), scalar(name))
	}
	return n
}

// Reseed draws every nemesis schedule again from seed (the scenario's, or
// `bench run --seed`). Each case draws from its own stream, keyed by its
// name, so trials get different schedules and adding a case does not change
// another's. A schedule is bounded: more than MaxFaults faults in one case
// is an error naming the nemesis, not minutes of work.
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
		sc := c.nemesis.sc
		sc.errs = errs
		out := append([]*Fault(nil), c.nemesis.fixed...)
		at := nd.Start.D()
		for i := 1; ; i++ {
			tmpl := rng.IntN(len(nd.Faults))
			dur := nd.For.draw(rng)
			if at+dur >= sc.runFor {
				break
			}
			if len(out) >= MaxFaults {
				errs.add(c.nemesis.line, c.nemesis.where+".nemesis", "draws more than %d faults in the case's %s: raise every.min (now %s)", MaxFaults, sc.runFor, nd.Every.Min)
				break
			}
			f := sc.parseFault(c.nemesis.where+".nemesis", tmpl, withWindow(&nd.Faults[tmpl], at, dur, fmt.Sprintf("nemesis-%d", i)))
			if f == nil {
				break
			}
			out = append(out, f)
			at += max(dur, nd.Every.draw(rng))
		}
		checkOverlaps(errs, c.nemesis.line, c.nemesis.where, out)
		c.Faults = out
	}
	if len(errs.List) > 0 {
		return errs
	}
	return nil
}

var commonFaultKeys = map[string]bool{"name": true, "type": true, "target": true, "at": true, "for": true, "fault_group": true}

// targetDoc is a fault's target as written: one name or role, a glob over
// the case's targets (link:etcd-*@instance-1), or a list of names.
type targetDoc []string

func (t *targetDoc) UnmarshalYAML(n *yaml.Node) error {
	switch n.Kind {
	case yaml.ScalarNode:
		*t = targetDoc{n.Value}
		return nil
	case yaml.SequenceNode:
		var list []string
		if err := n.Decode(&list); err != nil {
			return err
		}
		*t = list
		return nil
	}
	return fmt.Errorf("target: want a name, a pattern or a list of names")
}

// expandTargets turns a target as written into the concrete targets it
// names: a role or a name as is; a pattern (with * or ?) into every target
// of the case it matches; a list into its members. A set (more than one
// target) names concrete targets only, all of one kind.
func (sc scheduleCtx) expandTargets(doc targetDoc) ([]string, string) {
	var out []string
	seen := map[string]bool{}
	for _, t := range doc {
		t = strings.TrimSpace(t)
		// A link scoped to an instance role (link:etcd-*@holder) is
		// expanded over instance 1's links and keeps its role: the role is
		// resolved when the fault is injected, once for every link.
		if link, role, ok := linkRole(t); ok {
			if msg := sc.checkRole(role); msg != "" {
				return nil, msg
			}
			members, msg := sc.expandTargets(targetDoc{link + "@instance-1"})
			if msg != "" {
				return nil, strings.ReplaceAll(msg, "@instance-1", "@"+role)
			}
			for _, m := range members {
				m = strings.TrimSuffix(m, "@instance-1") + "@" + role
				if !seen[m] {
					seen[m] = true
					out = append(out, m)
				}
			}
			continue
		}
		if !strings.ContainsAny(t, "*?[") {
			if !seen[t] {
				seen[t] = true
				out = append(out, t)
			}
			continue
		}
		var hit []string
		for name := range sc.targets {
			if ok, err := path.Match(t, name); err != nil {
				return nil, fmt.Sprintf("%q is not a valid pattern: %v", t, err)
			} else if ok {
				hit = append(hit, name)
			}
		}
		if len(hit) == 0 {
			return nil, fmt.Sprintf("%q matches no target of this case (targets: %s)", t, sortedKeys(sc.targets))
		}
		sort.Strings(hit)
		for _, h := range hit {
			if !seen[h] {
				seen[h] = true
				out = append(out, h)
			}
		}
	}
	if len(out) > 1 {
		for _, t := range out {
			if faults.IsRole(t) {
				return nil, fmt.Sprintf("a set of targets names servers, instances or links, not roles (%q)", t)
			}
			if faults.KindOf(t) != faults.KindOf(out[0]) {
				return nil, fmt.Sprintf("a set of targets must be of one kind: %s is a %s, %s a %s", out[0], faults.KindOf(out[0]), t, faults.KindOf(t))
			}
		}
	}
	return out, ""
}

// checkRole says why a role cannot be resolved in this case, or "".
func (sc scheduleCtx) checkRole(role string) string {
	targets, kindOfServer, keys := sc.targets, sc.serverKinds, sc.keys
	if pt := faults.ParseTarget(role); pt.Kind == faults.Server && pt.Name == faults.RoleConnectedMember {
		return sc.checkConnected(pt.Scope)
	}
	if key, ok := strings.CutPrefix(role, faults.RoleHolderOf); ok {
		var n int
		if _, err := fmt.Sscanf(key, "k%d", &n); err != nil || fmt.Sprintf("k%d", n) != key || n < 0 || n >= keys {
			return fmt.Sprintf("%q names no key of this workload (keys are k0..k%d)", role, keys-1)
		}
		return ""
	}
	switch role {
	case faults.RoleLeader, faults.RoleFollower:
		for name, k := range targets {
			if k == faults.Server && cluster.HasLeader(kindOfServer[name]) {
				return ""
			}
		}
		return fmt.Sprintf(`role %q cannot be resolved: no server of this backend has a leader (etcd, consul, zookeeper, redis-sentinel do)`, role)
	case faults.RoleMaster:
		for name := range targets {
			if cluster.IsMaster(kindOfServer[name]) {
				return ""
			}
		}
		return `role "master" cannot be resolved: only redis-sentinel has a master that can change`
	}
	return ""
}

// checkConnected says why the member an instance (or the instance a role
// names) is connected to cannot be resolved, or "".
func (sc scheduleCtx) checkConnected(scope string) string {
	switch {
	case !sc.oneMember:
		return fmt.Sprintf("%q: this backend's clients do not talk to one member at a time (zookeeper and consul do, etcd with balancer: pick-first)", faults.RoleConnectedMember)
	case sc.compose:
		return fmt.Sprintf("%q is resolved from the kernel's list of a worker process's connections on this machine; with -compose the workers are containers", faults.RoleConnectedMember)
	case sc.external:
		return fmt.Sprintf("%q is resolved only among the servers lockbench starts (their addresses are the slot's own); with a targets file it is not resolved: name the server instead", faults.RoleConnectedMember)
	case scope == "":
		return fmt.Sprintf("%q names no instance: write connected-member@instance-N or connected-member@holder", faults.RoleConnectedMember)
	case faults.IsRole(scope) && faults.KindOf(scope) == faults.Instance:
		return sc.checkRole(scope)
	case sc.targets[scope] == faults.Instance:
		return ""
	}
	return fmt.Sprintf("%q: %q is no instance of this case, nor an instance role", faults.RoleConnectedMember+"@"+scope, scope)
}

func (sc scheduleCtx) parseFault(where string, j int, n *yaml.Node) *Fault {
	errs := sc.errs
	fw := fmt.Sprintf("%s.faults[%d]", where, j)
	if n.Kind != yaml.MappingNode {
		errs.add(n.Line, fw, "want a mapping with type, target, at and for")
		return nil
	}
	line := func(key string) int { return lineOf(n, key, n.Line) }
	var common struct {
		Name   string          `yaml:"name"`
		Type   string          `yaml:"type"`
		Target targetDoc       `yaml:"target"`
		At     config.Duration `yaml:"at"`
		For    config.Duration `yaml:"for"`
		Group  string          `yaml:"fault_group"`
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
		errs.addErr(n.Line, fw, err)
		return nil
	}
	f := &Fault{Name: common.Name, Type: common.Type, At: common.At.D(), For: common.For.D(), Group: common.Group}
	if f.Type == "" {
		errs.add(n.Line, fw+".type", "missing (known: %s)", faultNames())
		return nil
	}
	if f.Name == "" {
		f.Name = fmt.Sprintf("%s-%d", f.Type, j+1)
	}
	info, err := faults.Lookup(f.Type)
	if err != nil {
		errs.add(line("type"), fw+".type", "%v", err)
		return nil
	}
	bad := false
	members, msg := sc.expandTargets(common.Target)
	switch {
	case len(common.Target) == 0 || (len(members) == 1 && members[0] == ""):
		errs.add(n.Line, fw+".target", "missing")
		bad = true
	case msg != "":
		errs.add(line("target"), fw+".target", "%s", msg)
		bad = true
	default:
		f.Targets = members
		f.Target = strings.Join(members, ",")
		for _, t := range members {
			if !sc.checkTarget(f, info, t, fw, line("target")) {
				bad = true
			}
		}
	}
	if f.At < 0 || f.At > MaxDuration {
		errs.add(line("at"), fw+".at", "must be between 0 and %s", MaxDuration)
		bad = true
	}
	if f.For < 0 || f.For > MaxDuration || (f.For == 0 && !info.Instant) {
		errs.add(line("for"), fw+".for", "must be a positive duration of at most %s", MaxDuration)
		bad = true
	}
	if !bad && f.At+f.For >= sc.runFor {
		errs.add(line("at"), fw, "the window %s+%s ends after the case's duration %s", f.At, f.For, sc.runFor)
		bad = true
	}
	ft, err := info.New(func(v any) error { return config.DecodeStrict(rest, v) })
	if err != nil {
		errs.addErr(n.Line, fw, err)
		bad = true
	}
	if op, ok := ft.(faults.OneProtocol); ok && err == nil && op.Protocol() != "" {
		for _, t := range f.Targets {
			if on := sc.classOf(t); on == cluster.OnServer && sc.modeFor(t, on).WholeCuts {
				errs.add(line("protocol"), fw+".protocol", "the %s mode cuts a server from its peers in every protocol at once (a NetworkChaos); cut %s only from or to an instance", sc.modeFor(t, on).Name, op.Protocol())
				bad = true
				break
			}
		}
	}
	if named, ok := ft.(faults.Named); ok && err == nil {
		for _, name := range named.Names() {
			if name == faults.RoleConnectedMember {
				// The target instance's own member: the target must be
				// an instance (or an instance role).
				msg := sc.checkConnected("instance-1")
				for _, t := range f.Targets {
					if msg == "" && faults.KindOf(t) != faults.Instance {
						msg = fmt.Sprintf("%q stands for the member the target instance is connected to; %s is no instance", name, t)
					}
				}
				if msg != "" {
					errs.add(n.Line, fw, "%s", msg)
					bad = true
				}
				continue
			}
			if sc.targets[name] != faults.Server {
				errs.add(n.Line, fw, "%q does not exist in this case's cluster (servers: %s)", name, serverNames(sc.targets))
				bad = true
			}
		}
	}
	for _, t := range f.Targets {
		if len(info.Kinds) == 0 || bad || faults.KindOf(t) != faults.Server || faults.IsRole(t) {
			continue
		}
		switch k := sc.serverKinds[t]; {
		case !slices.Contains(info.Kinds, k):
			errs.add(line("target"), fw+".target", "%s acts on %s servers; %s is %s server", f.Type, strings.Join(info.Kinds, ", "), t, config.Article(k))
			bad = true
		case len(info.NeedsFaketime) > 0 && !slices.Contains(info.NeedsFaketime, k) && sc.modeFor(t, cluster.OnServer).NoEmulatedClock:
			errs.add(line("target"), fw+".target", "%s on %s: the %s mode moves the clock of %s servers only; a %s server's clock lockbench emulates through its data, which it does not write on a targets file's servers", f.Type, t, sc.modeFor(t, cluster.OnServer).Name, strings.Join(info.NeedsFaketime, ", "), k)
			bad = true
		case slices.Contains(info.NeedsFaketime, k) && !sc.modeFor(t, cluster.OnServer).Faketime:
			errs.add(line("target"), fw+".target", "%s moves the clock of a %s server through libfaketime, which the %s mode cannot start %s under", f.Type, k, sc.modeFor(t, cluster.OnServer).Name, t)
			bad = true
		case slices.Contains(info.NeedsFaketime, k) && sc.here(t) && sc.modeFor(t, cluster.OnServer).Name != cluster.ModeKubernetes:
			if err := cluster.Probe.Faketime(); err != nil {
				errs.add(line("type"), fw+".type", "%v", err)
				bad = true
			}
		}
	}
	// What the fault needs of the machine, where the mode performs it here.
	here := false
	for _, t := range f.Targets {
		here = here || sc.here(t)
	}
	if info.NeedsCgroup != "" && here && !bad {
		if err := cluster.Probe.Cgroups(info.NeedsCgroup); err != nil {
			errs.add(line("type"), fw+".type", "%v", err)
			bad = true
		}
	}
	if info.NeedsFuse && here && !bad {
		if err := cluster.Probe.Fuse(); err != nil {
			errs.add(line("type"), fw+".type", "%v", err)
			bad = true
		}
	}
	if info.NeedsNetem && here && !bad {
		if err := cluster.Probe.Netem(); err != nil {
			errs.add(n.Line, fw+".type", "%v (the loss fault drops packets with iptables instead; latency on TCP links is the latency fault)", err)
			bad = true
		}
	}
	for _, t := range f.Targets {
		if !info.NeedsFirewall || bad {
			break
		}
		if !sc.here(t) {
			continue // the rules are made on the server's own host
		}
		if msg := checkFirewall(t, sc.serverKinds, sc.targets, sc.hosts, sc.modeFor(t, sc.classOf(t)).SourceCuts); msg != "" {
			errs.add(line("target"), fw+".target", "%s", msg)
			bad = true
		}
	}
	if bad {
		return nil
	}
	f.Fault = ft
	return f
}

// linkRole splits a link scoped to an instance role
// ("link:etcd-1@holder") into the link and the role.
func linkRole(t string) (string, string, bool) {
	pt := faults.ParseTarget(t)
	if pt.Kind != faults.Link || !pt.Role() || faults.KindOf(pt.Scope) != faults.Instance {
		return "", "", false
	}
	return "link:" + pt.Name, pt.Scope, true
}

// checkTarget validates one concrete target (or role) of a fault.
func (sc scheduleCtx) checkTarget(f *Fault, info faults.Info, target, fw string, at int) bool {
	errs := sc.errs
	if link, _, ok := linkRole(target); ok {
		target = link + "@instance-1" // every instance has the same links
	}
	switch {
	case faults.IsRole(target):
		if msg := sc.checkRole(target); msg != "" {
			errs.add(at, fw+".target", "%s", msg)
			return false
		}
		if kind := faults.KindOf(target); !info.Accepts(kind) {
			errs.add(at, fw+".target", "%s cannot target the %q role (it acts on %v, the role is a %s)", f.Type, target, info.Targets, kind)
			return false
		}
	default:
		kind, exists := sc.targets[target]
		if !exists {
			errs.add(at, fw+".target", "%q does not exist in this case's cluster, or no instance uses it (targets: %s)", target, sortedKeys(sc.targets))
			return false
		}
		if !info.Accepts(kind) {
			errs.add(at, fw+".target", "%s cannot act on %s %q (it acts on %v)", f.Type, kind, target, info.Targets)
			return false
		}
	}
	on := sc.classOf(target)
	m := sc.modeFor(target, on)
	if !m.Does(info.Action, on) {
		why := m.Why
		if why == "" {
			why = "it has no way to"
		}
		if faults.IsRole(target) && on == cluster.OnServer && sc.controlled != nil && sc.mode.Does(info.Action, on) {
			var bare []string
			for _, s := range sc.serversOf(target) {
				if !sc.controlled(s) {
					bare = append(bare, s)
				}
			}
			why = fmt.Sprintf("a role acts through the control plane only when every server of the case has a control section, and %s has none", strings.Join(bare, ", "))
		}
		errs.add(at, fw+".target", "%s on %s: the %s mode cannot %s %s: %s", info.Name, target, m.Name, info.Action.Verb(), on, why)
		return false
	}
	if m.PodCuts && info.Action == faults.ActCut && on == cluster.OnServer && sc.controlled != nil {
		var bare []string
		for name, k := range sc.targets {
			if k == faults.Server && !sc.controlled(name) {
				bare = append(bare, name)
			}
		}
		if len(bare) > 0 {
			sort.Strings(bare)
			errs.add(at, fw+".target", "%s on %s: the %s mode cuts servers with a NetworkChaos between their pods, and %s has no control section", info.Name, target, m.Name, strings.Join(bare, ", "))
			return false
		}
	}
	if field := m.ControlNeeds[info.Action]; field != "" && on == cluster.OnServer {
		for _, s := range sc.serversOf(target) {
			if !sc.controlHas(s, field) {
				errs.add(at, fw+".target", "%s on %s: %s's control section gives no %s", info.Name, target, s, field)
				return false
			}
		}
	}
	return true
}

// serversOf lists the servers a server target may be: itself, or every
// server of the case for a role.
func (sc scheduleCtx) serversOf(target string) []string {
	if !faults.IsRole(target) {
		return []string{target}
	}
	var out []string
	for name, k := range sc.targets {
		if k == faults.Server {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// checkOverlaps rejects two faults whose windows overlap on a target they
// may share and whose claims on it meet (faults.Info.Claims: a kill inside
// a pause, two latency toxics on one link); faults that take over
// different things of a target (a kill inside a disk stall, latency and a
// bandwidth limit) may overlap. A role may resolve to any target of its
// kind, so it may share one with each of them. Sorted by start, the sweep
// compares only windows that overlap.
func checkOverlaps(errs *Errors, line int, where string, fs []*Fault) {
	byStart := append([]*Fault(nil), fs...)
	sort.SliceStable(byStart, func(i, j int) bool { return byStart[i].At < byStart[j].At })
	for i, a := range byStart {
		ai, err := faults.Lookup(a.Type)
		if err != nil {
			continue
		}
		for _, b := range byStart[i+1:] {
			if b.At >= a.At+a.For && !(a.For == 0 && b.At == a.At) {
				break
			}
			bi, err := faults.Lookup(b.Type)
			if err != nil {
				continue
			}
			what := ai.Conflicts(bi)
			if what == "" {
				continue
			}
			if t, ok := shared(a.Targets, b.Targets); ok {
				errs.add(line, where+".faults", "%s and %s overlap on target %s, and both take over its %s", a.Name, b.Name, t, what)
			}
		}
	}
}

// shared returns a target two faults may both act on at once: one they
// name alike, or a role and a target of the role's kind.
func shared(as, bs []string) (string, bool) {
	for _, a := range as {
		for _, b := range bs {
			if a == b {
				return a, true
			}
			ka, kb := faults.KindOf(a), faults.KindOf(b)
			if ka == kb && ka != faults.Link && (faults.IsRole(a) || faults.IsRole(b)) {
				return a + " (as " + b + ")", true
			}
		}
	}
	return "", false
}

// checkFirewall says why an iptables partition cannot be made here, or
// "". An instance can always be cut (its clients use its own address, or
// its mark); where the mode says cuts need servers that send from their
// own address (cluster.Mode.SourceCuts), a server must.
func checkFirewall(target string, serverKinds map[string]string, targets map[string]faults.Kind, hosts, sourceCuts bool) string {
	if hosts {
		// Every server sends from its own host (a namespace, or a
		// container): any pair can be cut.
		if err := cluster.Probe.Hosts(); err != nil {
			return err.Error()
		}
		return ""
	}
	if err := cluster.Probe.Firewall(); err != nil {
		return err.Error()
	}
	if !sourceCuts || targets[target] == faults.Instance || (faults.IsRole(target) && faults.KindOf(target) == faults.Instance) {
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
			return fmt.Sprintf("%s servers do not use their own address as the source of their peer connections, so an address-level partition between members would not separate them (run the scenario with network: hosts, cut an instance from them instead, or use link faults; etcd's peer links are link:<member>-peer)", k)
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
	return strings.Join(append(ks, "link:<server>@instance-N", faults.RoleHolder, faults.RoleHolderOf+"<key>", faults.RoleWaiter, faults.RoleLeader, faults.RoleFollower, faults.RoleMaster), ", ")
}

func faultNames() string {
	var n []string
	for _, f := range faults.All() {
		n = append(n, f.Name)
	}
	return strings.Join(n, ", ")
}
