package faults

import (
	"strconv"
	"strings"
)

// Target is a fault's target, parsed once from the scenario's target
// field. The grammar (the one place it is known; scenario validation,
// the runner's link plan and the faults themselves read it through
// ParseTarget):
//
//	redis-1                   a server, by name (Server)
//	leader | follower | master   a server role, resolved at injection (Server)
//	instance-2                a worker instance (Instance)
//	holder | a-waiter | holder-of:KEY   an instance role (Instance)
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
}

// ParseTarget parses a target string; it never fails (an unknown name
// is a server name, for validation to look up).
func ParseTarget(s string) Target {
	if link, ok := strings.CutPrefix(s, "link:"); ok {
		name, scope, _ := strings.Cut(link, "@")
		if scope == "" {
			name = link // "a@" is a (bad) name, for validation to refuse
		}
		return Target{Kind: Link, Name: name, Scope: scope}
	}
	if name, scope, ok := strings.Cut(s, "@"); ok && name == RoleConnectedMember {
		return Target{Kind: Server, Name: name, Scope: scope}
	}
	if strings.HasPrefix(s, "instance-") || s == RoleHolder || s == RoleWaiter || strings.HasPrefix(s, RoleHolderOf) {
		return Target{Kind: Instance, Name: s}
	}
	return Target{Kind: Server, Name: s}
}

// String is the target as a scenario writes it: ParseTarget(t.String())
// is t.
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

// Role reports whether the target is resolved at injection: a role, or a
// link scoped to an instance role.
func (t Target) Role() bool {
	if t.Kind == Link {
		return IsRole(t.Scope)
	}
	return IsRole(t.String())
}

// Instance is the number of the instance the target is or is scoped to
// (instance-2, link:redis-1@instance-2), and false for any other.
func (t Target) Instance() (int, bool) {
	s := t.Name
	if t.Kind == Link {
		s = t.Scope
	} else if t.Kind != Instance {
		return 0, false
	}
	n, ok := instanceNumber(s)
	return n, ok
}

// instanceNumber reads "instance-N" (N ≥ 1, written without leading
// zeros or sign, so that the name round-trips).
func instanceNumber(s string) (int, bool) {
	d, ok := strings.CutPrefix(s, "instance-")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(d)
	if err != nil || n < 1 || strconv.Itoa(n) != d {
		return 0, false
	}
	return n, true
}

// Lane reports whether the target belongs to one trial of a case run as
// several side by side: an instance, an instance role, or a link scoped
// to either.
func (t Target) Lane() bool {
	switch t.Kind {
	case Instance:
		return true
	case Link:
		_, inst := instanceNumber(t.Scope)
		return inst || (IsRole(t.Scope) && KindOf(t.Scope) == Instance)
	}
	return false
}
