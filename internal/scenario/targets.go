package scenario

import (
	"fmt"
	"path"
	"sort"
	"strings"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/faults"
	"github.com/lockbench/lockbench/history"
	"github.com/lockbench/lockbench/internal/cluster"
	"github.com/lockbench/lockbench/internal/links"
	"github.com/lockbench/lockbench/internal/workload"
	"go.yaml.in/yaml/v3"
)

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
// names, each parsed once: a role or a name as is; a pattern (with * or
// ?) into every target of the case it matches; a list into its members.
// A set (more than one target) names concrete targets only, all of one
// kind.
func (sc scheduleCtx) expandTargets(doc targetDoc) ([]faults.Target, string) {
	var out []faults.Target
	seen := map[string]bool{}
	add := func(s string) {
		if !seen[s] {
			seen[s] = true
			out = append(out, faults.ParseTarget(s))
		}
	}
	for _, w := range doc {
		w = strings.TrimSpace(w)
		// A link scoped to an instance role (link:etcd-*@holder) is
		// expanded over instance 1's links and keeps its role: the role is
		// resolved when the fault is injected, once for every link.
		if t := faults.ParseTarget(w); t.Kind == faults.Link && t.ScopeRole() {
			if msg := sc.checkRole(faults.Target{Kind: faults.Instance, Name: t.Scope}); msg != "" {
				return nil, msg
			}
			one := faults.LinkTarget(t.Name, 1)
			members, msg := sc.expandTargets(targetDoc{one.String()})
			if msg != "" {
				return nil, strings.ReplaceAll(msg, "@"+one.Scope, "@"+t.Scope)
			}
			for _, m := range members {
				m.Scope, m.Instance = t.Scope, 0
				add(m.String())
			}
			continue
		}
		if !strings.ContainsAny(w, "*?[") {
			add(w)
			continue
		}
		var hit []string
		for name := range sc.targets {
			if ok, err := path.Match(w, name); err != nil {
				return nil, fmt.Sprintf("%q is not a valid pattern: %v", w, err)
			} else if ok {
				hit = append(hit, name)
			}
		}
		if len(hit) == 0 {
			return nil, fmt.Sprintf("%q matches no target of this case (targets: %s)", w, sortedKeys(sc.targets))
		}
		sort.Strings(hit)
		for _, h := range hit {
			add(h)
		}
	}
	if len(out) > 1 {
		for _, t := range out {
			// Links scoped to one instance role are a set: the role is
			// resolved once for all of them.
			if t.IsRole() && !(t.Kind == faults.Link && t.ScopeRole()) {
				return nil, fmt.Sprintf("a set of targets names servers, instances or links, not roles (%q)", t)
			}
			if t.Kind != out[0].Kind {
				return nil, fmt.Sprintf("a set of targets must be of one kind: %s is a %s, %s a %s", out[0], out[0].Kind, t, t.Kind)
			}
		}
	}
	return out, ""
}

// checkRole says why a role cannot be resolved in this case, or "".
func (sc scheduleCtx) checkRole(role faults.Target) string {
	targets, kindOfServer, keys := sc.targets, sc.serverKinds, sc.keys
	if role.Kind == faults.Server && role.Name == faults.RoleConnectedMember {
		return sc.checkConnected(role)
	}
	if key, ok := role.Key(); ok {
		if n, ok := workload.ParseKey(key); !ok || n >= keys {
			return fmt.Sprintf("%q names no key of this workload (keys are %s..%s)", role, workload.Key(0), workload.Key(keys-1))
		}
		return ""
	}
	switch role.Name {
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
// names) is connected to cannot be resolved, or "": t is a
// connected-member target (connected-member@instance-2, @holder).
func (sc scheduleCtx) checkConnected(t faults.Target) string {
	switch {
	case !sc.oneMember:
		return fmt.Sprintf("%q: this backend's clients do not talk to one member at a time (zookeeper and consul do, etcd with balancer: pick-first)", faults.RoleConnectedMember)
	case sc.compose:
		return fmt.Sprintf("%q is resolved from the kernel's list of a worker process's connections on this machine; with -compose the workers are containers", faults.RoleConnectedMember)
	case sc.external:
		return fmt.Sprintf("%q is resolved only among the servers lockbench starts (their addresses are the slot's own); with a targets file it is not resolved: name the server instead", faults.RoleConnectedMember)
	case t.Scope == "":
		return fmt.Sprintf("%q names no instance: write connected-member@instance-N or connected-member@holder", faults.RoleConnectedMember)
	case t.ScopeRole():
		return sc.checkRole(faults.Target{Kind: faults.Instance, Name: t.Scope})
	case t.Instance != 0 && sc.targets[t.Instance.String()] == faults.Instance:
		return ""
	}
	return fmt.Sprintf("%q: %q is no instance of this case, nor an instance role", t, t.Scope)
}

// checkTarget validates one concrete target (or role) of a fault.
func (sc scheduleCtx) checkTarget(f *Fault, info faults.Info, target faults.Target, fw string, at int) bool {
	errs := sc.errs
	if target.Kind == faults.Link && target.ScopeRole() {
		target = faults.LinkTarget(target.Name, 1) // every instance has the same links
	}
	switch {
	case target.IsRole():
		if msg := sc.checkRole(target); msg != "" {
			errs.add(at, fw+".target", "%s", msg)
			return false
		}
		if !info.Accepts(target.Kind) {
			errs.add(at, fw+".target", "%s cannot target the %q role (it acts on %v, the role is a %s)", f.Type, target, info.Targets, target.Kind)
			return false
		}
	default:
		kind, exists := sc.targets[target.String()]
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
		if target.IsRole() && on == cluster.OnServer && sc.controlled != nil && sc.mode.Does(info.Action, on) {
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
func (sc scheduleCtx) serversOf(target faults.Target) []string {
	if !target.IsRole() {
		return []string{target.Name}
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

// targets lists the concrete target names of a case's cluster, and the
// server kind of each server. A client link is a target only if some
// instance dials that server, and link:<server>@instance-N only if
// instance N does: a fault on a link nobody uses would do nothing.
func (c *Case) targets() (map[string]faults.Kind, map[string]string) {
	t := map[string]faults.Kind{faults.LinkTarget(links.Resource, 0).String(): faults.Link}
	kindOfServer := map[string]string{}
	for i := history.Instance(1); i <= history.Instance(c.Workload.Instances); i++ {
		t[faults.InstanceTarget(i).String()] = faults.Instance
		t[faults.LinkTarget(links.Resource, i).String()] = faults.Link
	}
	if c.Backend == nil {
		return t, kindOfServer
	}
	for _, s := range c.Servers() {
		t[s.Name] = faults.Server
		kindOfServer[s.Name] = s.Kind
	}
	for _, l := range cluster.ServerLinks(c.Servers()) {
		t[faults.LinkTarget(l, 0).String()] = faults.Link
	}
	for i := 1; i <= c.Workload.Instances; i++ {
		for _, name := range append(backends.Dials(c.Backend, i, c.Workload.Instances), c.jobServers()...) {
			t[faults.LinkTarget(name, 0).String()] = faults.Link
			t[faults.LinkTarget(name, history.Instance(i)).String()] = faults.Link
		}
	}
	return t, kindOfServer
}
