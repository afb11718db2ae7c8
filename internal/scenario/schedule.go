package scenario

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/lockbench/lockbench/faults"
	"github.com/lockbench/lockbench/history"
	"github.com/lockbench/lockbench/internal/cluster"
	"github.com/lockbench/lockbench/internal/config"
	"github.com/lockbench/lockbench/internal/workload"
	"go.yaml.in/yaml/v3"
)

// scheduleCtx is what validating a case's faults needs.
type scheduleCtx struct {
	errs        *Errors
	targets     map[string]faults.Kind
	serverKinds map[string]string
	serverLinks map[string]bool // links between servers, by name (etcd-1-peer)
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
func (sc scheduleCtx) classOf(t faults.Target) cluster.On {
	switch {
	case t.Kind == faults.Instance:
		return cluster.OnInstance
	case t.Kind == faults.Server:
		return cluster.OnServer
	case sc.serverLinks[t.Name]:
		return cluster.OnServerLink
	}
	return cluster.OnClientLink
}

// modeFor is the mode that acts on target t of class on: the case's, but
// for a server of a targets file that has no control plane (or a server
// role when some server has none), which is in the targets mode.
func (sc scheduleCtx) modeFor(t faults.Target, on cluster.On) cluster.Mode {
	if on == cluster.OnServer && sc.controlled != nil && !sc.remoteTarget(t) {
		if m, err := cluster.LookupMode(cluster.ModeTargets); err == nil {
			return m
		}
	}
	return sc.mode
}

// here reports whether the mode performs the fault's action on target t
// on this machine, whose requirements then apply.
func (sc scheduleCtx) here(t faults.Target) bool {
	on := sc.classOf(t)
	return sc.modeFor(t, on).Here(on)
}

// remoteTarget reports whether a server fault on target reaches it over
// a control plane: a controlled server, or a server role when every server
// of the case is controlled.
func (sc scheduleCtx) remoteTarget(target faults.Target) bool {
	if sc.controlled == nil {
		return false
	}
	if !target.IsRole() {
		return sc.controlled(target.Name)
	}
	for name, k := range sc.targets {
		if k == faults.Server && !sc.controlled(name) {
			return false
		}
	}
	return true
}

var commonFaultKeys = map[string]bool{"name": true, "type": true, "target": true, "at": true, "for": true, "fault_group": true, "trial": true}

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
		Trial  int             `yaml:"trial"`
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
	f := &Fault{Name: common.Name, Type: common.Type, At: common.At.D(), For: common.For.D(), Group: common.Group, Trial: common.Trial, line: n.Line}
	if f.Trial < 0 {
		errs.add(line("trial"), fw+".trial", "must be a trial's number (1 or more), got %d", f.Trial)
		return nil
	}
	if len(rest.Content) > 0 {
		if err := rest.Decode(&f.Options); err != nil {
			errs.addErr(n.Line, fw, err)
			return nil
		}
	}
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
	case len(common.Target) == 0 || (len(members) == 1 && members[0].String() == ""):
		errs.add(n.Line, fw+".target", "missing")
		bad = true
	case msg != "":
		errs.add(line("target"), fw+".target", "%s", msg)
		bad = true
	default:
		f.Targets = members
		for _, t := range members {
			if !sc.checkTarget(f, info, t, fw, line("target")) {
				bad = true
			}
		}
	}
	if f.At < 0 || f.At > workload.MaxDuration {
		errs.add(line("at"), fw+".at", "must be between 0 and %s", workload.MaxDuration)
		bad = true
	}
	if f.For < 0 || f.For > workload.MaxDuration || (f.For == 0 && !info.Instant) {
		errs.add(line("for"), fw+".for", "must be a positive duration of at most %s", workload.MaxDuration)
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
				msg := sc.checkConnected(faults.Target{Kind: faults.Server, Name: faults.RoleConnectedMember}.Scoped(1))
				for _, t := range f.Targets {
					if msg == "" && t.Kind != faults.Instance {
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
		if info.Asks == "" || bad || t.Kind != faults.Server || t.IsRole() {
			continue
		}
		k := sc.serverKinds[t.Name]
		kind := cluster.FaultKind(k)
		switch real := info.Faketime(kind.Abilities); {
		case !kind.Can(info.Asks):
			errs.add(line("target"), fw+".target", "%s acts on %s servers; %s is %s server", f.Type, strings.Join(info.ActsOn(cluster.FaultKinds()), ", "), t, config.Article(k))
			bad = true
		case info.Asks == faults.AskClock && !real && sc.modeFor(t, cluster.OnServer).NoEmulatedClock:
			errs.add(line("target"), fw+".target", "%s on %s: the %s mode moves the clock of %s servers only; a %s server's clock lockbench emulates through its data, which it does not write on a targets file's servers", f.Type, t, sc.modeFor(t, cluster.OnServer).Name, strings.Join(cluster.ClockKinds(info, true), ", "), k)
			bad = true
		case real && !sc.modeFor(t, cluster.OnServer).Faketime:
			errs.add(line("target"), fw+".target", "%s moves the clock of a %s server through libfaketime, which the %s mode cannot start %s under", f.Type, k, sc.modeFor(t, cluster.OnServer).Name, t)
			bad = true
		case real && sc.here(t) && sc.modeFor(t, cluster.OnServer).Name != cluster.ModeKubernetes:
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
		if msg := checkFirewall(t, sc.serverKinds, sc.hosts, sc.modeFor(t, sc.classOf(t)).SourceCuts); msg != "" {
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
			if a.Trial != 0 && b.Trial != 0 && a.Trial != b.Trial {
				continue // two trials' own faults never meet
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
func shared(as, bs []faults.Target) (string, bool) {
	for _, a := range as {
		for _, b := range bs {
			if a == b {
				return a.String(), true
			}
			if a.Kind == b.Kind && a.Kind != faults.Link && (a.IsRole() || b.IsRole()) {
				return a.String() + " (as " + b.String() + ")", true
			}
		}
	}
	return "", false
}

// checkFirewall says why an iptables partition cannot be made here, or
// "". An instance can always be cut (its clients use its own address, or
// its mark); where the mode says cuts need servers that send from their
// own address (cluster.Mode.SourceCuts), a server must.
func checkFirewall(target faults.Target, serverKinds map[string]string, hosts, sourceCuts bool) string {
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
	if !sourceCuts || target.Kind == faults.Instance {
		return ""
	}
	kinds := map[string]bool{}
	if k, ok := serverKinds[target.Name]; ok && !target.IsRole() {
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

func faultNames() string {
	var n []string
	for _, f := range faults.All() {
		n = append(n, f.Name)
	}
	return strings.Join(n, ", ")
}

// Core is what every record of the fault says of it (history.FaultCore):
// its name, type, target and, from its registration, what it does to the
// processes it hits.
func (f *Fault) Core() history.FaultCore {
	c := history.FaultCore{Name: f.Name, Type: f.Type, Target: f.Target()}
	if info, err := faults.Lookup(f.Type); err == nil {
		c.Effect = info.Effect
	}
	return c
}
