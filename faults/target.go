package faults

import (
	"strings"

	"github.com/lockbench/lockbench/history"
)

// Target is a fault's target, parsed once where text enters the program
// (a scenario's target field, by ParseTarget) and carried typed after:
// to validation, to the runner, which resolves a role into a concrete
// target at injection, and to the fault, which acts on a concrete one.
// The grammar (the one place it is known):
//
//	redis-1                   a server, by name (Server)
//	leader | follower | master   a server role, resolved at injection (Server)
//	instance-2                a worker instance (Instance)
//	holder | a-waiter | holder-of:KEY   an instance role (Instance)
//	executor | executor@PHASE a job workload's instance role: a client in
//	                          a job attempt (at before-effect,
//	                          during-effect or after-effect) (Instance)
//	link:redis-1              a link every instance shares: a server's
//	                          client link, a server-side link (etcd-1-peer,
//	                          redis-1-repl) or the resource (Link)
//	link:redis-1@instance-2   that link, for one instance only (Link)
//	link:redis-1@holder       for the instance a role names at injection
//	connected-member@instance-2   the server instance 2's clients are
//	                          connected to at injection (Server; the scope
//	                          may be an instance role: connected-member@holder)
//
// Globs (etcd-*) and lists are the scenario's, expanded before parsing.
// A Target says what a string is; whether such a server, instance or link
// exists in the case is validation's to say.
type Target struct {
	Kind Kind
	// Name is the server's, the instance's, the role's or the link's
	// name (without "link:" and without its scope).
	Name string
	// Scope is a link's instance ("instance-2") or instance role
	// ("holder"), or "" for a link every instance shares; and the
	// instance (or instance role) whose connected member a
	// connected-member target is.
	Scope string
	// Instance is the instance the target is (Kind Instance) or is scoped
	// to (a link, a connected member), read from Name or Scope when it
	// parses; 0 when the target names none.
	Instance history.Instance
	// From is, for a concrete target the runner resolved from a role at
	// injection, that role ("holder", "leader"); "" for a target named as
	// such. A fault that must know why it hit its target reads it (a
	// pause of the holder must stop an instance that still holds).
	From string
}

// ParseTarget parses a target string; it never fails (an unknown name
// is a server name, for validation to look up), and String gives the
// string back.
func ParseTarget(s string) Target {
	if link, ok := strings.CutPrefix(s, "link:"); ok {
		name, scope, _ := strings.Cut(link, "@")
		if scope == "" {
			name = link // "a@" is a (bad) name, for validation to refuse
		}
		t := Target{Kind: Link, Name: name, Scope: scope}
		t.Instance, _ = history.ParseInstance(scope)
		return t
	}
	if name, scope, ok := strings.Cut(s, "@"); ok && name == RoleConnectedMember && scope != "" {
		t := Target{Kind: Server, Name: name, Scope: scope}
		t.Instance, _ = history.ParseInstance(scope)
		return t
	}
	if strings.HasPrefix(s, "instance-") || instanceRole(s) {
		t := Target{Kind: Instance, Name: s}
		t.Instance, _ = history.ParseInstance(s)
		return t
	}
	return Target{Kind: Server, Name: s}
}

// ServerTarget is the server named name.
func ServerTarget(name string) Target { return Target{Kind: Server, Name: name} }

// InstanceTarget is worker instance n.
func InstanceTarget(n history.Instance) Target {
	return Target{Kind: Instance, Name: n.String(), Instance: n}
}

// LinkTarget is the link name: every instance's when n is 0, else
// instance n's own.
func LinkTarget(name string, n history.Instance) Target {
	if n == 0 {
		return Target{Kind: Link, Name: name}
	}
	return Target{Kind: Link, Name: name, Scope: n.String(), Instance: n}
}

// String is the target as a scenario writes it: ParseTarget(t.String())
// is t (but for From, which no scenario writes).
func (t Target) String() string {
	if t.Kind == Link {
		return "link:" + t.Link()
	}
	if t.Scope != "" {
		return t.Name + "@" + t.Scope
	}
	return t.Name
}

// Link is a link target's proxy name: its name, with "@scope" when it
// is one instance's ("redis-1@instance-2").
func (t Target) Link() string {
	if t.Scope == "" {
		return t.Name
	}
	return t.Name + "@" + t.Scope
}

// IsRole reports whether the target is resolved at injection: a role, a
// link scoped to a role, or a connected member.
func (t Target) IsRole() bool {
	if t.Kind == Link {
		return role(t.Scope)
	}
	return role(t.Name) || (t.Name == RoleConnectedMember && t.Scope != "")
}

// ScopeRole reports whether the target is scoped to an instance role
// (link:etcd-1@holder, connected-member@holder): the role is resolved
// first, once for every member of a set.
func (t Target) ScopeRole() bool { return instanceRole(t.Scope) }

// Key is the key of a holder-of:KEY role, and false for any other target.
func (t Target) Key() (string, bool) {
	if t.Kind != Instance {
		return "", false
	}
	return strings.CutPrefix(t.Name, RoleHolderOf)
}

// Lane reports whether the target belongs to one trial of a case run as
// several side by side: an instance, an instance role, or a link scoped
// to either.
func (t Target) Lane() bool {
	switch t.Kind {
	case Instance:
		return true
	case Link:
		return t.Instance != 0 || instanceRole(t.Scope)
	}
	return false
}

// Is reports whether t and o name the same server, instance or link,
// whatever role either was resolved from.
func (t Target) Is(o Target) bool {
	return t.Kind == o.Kind && t.Name == o.Name && t.Scope == o.Scope
}

// Scoped is t (a link, or a connected member) scoped to instance n.
func (t Target) Scoped(n history.Instance) Target {
	t.Scope, t.Instance = n.String(), n
	return t
}

// role reports whether s names a role (not a connected member, whose
// role is its name with a scope).
func role(s string) bool {
	switch s {
	case RoleLeader, RoleFollower, RoleMaster:
		return true
	}
	return instanceRole(s)
}

// instanceRole reports whether s names an instance role: holder, a-waiter,
// holder-of:KEY, executor, executor@PHASE.
func instanceRole(s string) bool {
	_, executor := executorPhase(s)
	return s == RoleHolder || s == RoleWaiter || strings.HasPrefix(s, RoleHolderOf) || executor
}

// executorPhase is the phase of an executor role ("" for executor alone);
// false for any other name.
func executorPhase(s string) (string, bool) {
	role, phase, scoped := strings.Cut(s, "@")
	if role != RoleExecutor || (scoped && phase == "") {
		return "", false
	}
	return phase, true
}

// Phase is the phase an executor role aims at ("" for any phase), and
// false for any other target.
func (t Target) Phase() (string, bool) {
	if t.Kind != Instance {
		return "", false
	}
	return executorPhase(t.Name)
}

// Targets writes a set of targets as a scenario's record does: their
// strings, separated by commas.
func Targets(ts []Target) string {
	s := make([]string, len(ts))
	for i, t := range ts {
		s[i] = t.String()
	}
	return strings.Join(s, ",")
}
